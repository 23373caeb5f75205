"""The answerer's prompt: the thing a question asks for, and the note said when no
retrieved item names it (a small answerer otherwise answers a middle name with the
name of a friend)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deltamem.answer import Answerer, asked_thing, memory_lines, unmentioned
from deltamem.types import MemoryItem, SearchHit
from deltamem.yesno import is_yes_no, restates, without_restated_premise
from tests.fakes import ScoringLLM, ScriptedLLM

AT = datetime(2031, 3, 11, tzinfo=UTC)


def hit(text: str, kind: str = "fact") -> SearchHit:
    item = MemoryItem(
        id=text[:6], user_id="u", content=text, timestamp=AT, created_at=AT, updated_at=AT
    )
    return SearchHit(memory=item, score=0.5, kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "thing"),
    [
        ("What is Sarah Garcia's middle name?", "middle name"),
        ("What is Martin's middle name as of Mar 11, 2031?", "middle name"),
        ("On Sep 05, 2025, what was Sarah Garcia's job title at Microsoft?", "job title"),
        ("What was Martin Mark's exact weight on March 10, 2029?", "exact weight"),
        (
            "What is the name of Martin Mark's new colleague mentioned on May 01, 2029?",
            "name of the new colleague",
        ),
        ("what is her blood type?", "blood type"),
    ],
)
def test_the_thing_asked_is_read_from_the_question(question: str, thing: str) -> None:
    asked = asked_thing(question)
    assert asked is not None and asked.thing == thing


@pytest.mark.parametrize(
    "question",
    [
        "Where does Priya live now?",
        "Did Martin express a dislike for horror films on February 13, 2029?",
        "What type of projects might Sarah Garcia focus on as a Senior Manager in 2026?",
        "How did her promotion influence her approach to health?",
    ],
)
def test_other_questions_ask_for_no_one_thing(question: str) -> None:
    assert asked_thing(question) is None


def test_a_name_no_item_gives_is_said_to_be_unmentioned() -> None:
    hits = [
        hit("Sarah Garcia's friends are Matthew Wilson and Patricia Lee."),
        hit("Sarah Garcia: My name is Sarah Garcia.", kind="episode"),
    ]
    assert unmentioned("What is Sarah Garcia's middle name?", hits) == "middle name"
    # every word of the thing in one item, in any form, is a mention
    named = [*hits, hit("Sarah Garcia never uses her middle names.")]
    assert unmentioned("What is Sarah Garcia's middle name?", named) is None
    dog = "What is the name of Sarah's dog?"
    assert unmentioned(dog, hits) == "name of the dog"
    assert unmentioned(dog, [hit("Sarah Garcia walks her dog at six.")]) is None
    # a thing that is not a name gets no note: items say it in other words
    # ("born on" for a birth date) and the answerer abstains unprompted
    assert asked_thing("What is Sarah's blood type?") is not None
    assert unmentioned("What is Sarah's blood type?", hits) is None
    assert unmentioned("What is Sarah Garcia's birth date?", hits) is None
    assert unmentioned("Where does Sarah live?", hits) is None


def test_words_that_qualify_the_question_are_not_needed() -> None:
    asked = asked_thing("What was Martin Mark's exact weight on March 10, 2029?")
    assert asked is not None and asked.needed == ["weight"] and not asked.a_name
    asked = asked_thing("What is Martin's current middle name?")
    assert asked is not None and asked.needed == ["middl"] and asked.a_name


def test_the_note_is_in_the_prompt_only_when_the_thing_is_unmentioned() -> None:
    answerer = Answerer(ScriptedLLM())
    hits = [hit("Sarah Garcia's friends are Matthew Wilson and Patricia Lee.")]
    asked = answerer.prompt("What is Sarah Garcia's middle name?", hits, asked_at=AT)
    text = asked[1]["content"]
    note = 'Answer "not known from memory" unless an item above states the middle name.'
    assert note in text
    assert text.index("Today is 2031-03-11.") < text.index(note) < text.index("Question:")
    plain = answerer.prompt("Who are Sarah Garcia's friends?", hits, asked_at=AT)[1]["content"]
    assert (
        "not known from memory unless" not in plain and "Today is 2031-03-11.\nQuestion:" in plain
    )


def test_a_question_not_in_english_is_answered_in_its_language() -> None:
    answerer = Answerer(ScriptedLLM())
    hits = [hit("Claire Dubois a une sœur Sophie qui est architecte à Nantes")]
    french = answerer.prompt("Quel est le métier de la sœur de Claire ?", hits, asked_at=AT)
    assert "The question is in French: answer in French." in french[1]["content"]
    english = answerer.prompt("What does Claire's sister do for a living?", hits, asked_at=AT)
    assert "answer in" not in english[1]["content"]


# -- a "Yes" the model gives unsurely -------------------------------------------------


ROMCOM = "Did Sarah Garcia express a liking for romantic comedies on Sep 06, 2025?"
DISLIKE = [
    hit("Sarah Garcia does not like to watch romantic comedies; she finds them predictable.")
]


@pytest.mark.parametrize(
    ("question", "yes_no"),
    [
        (ROMCOM, True),
        ("Would Melanie go on another roadtrip soon?", True),
        ("Is Priya engaged?", True),
        ("Would Melanie be more interested in a national park or a theme park?", False),
        ("Where does Priya live now?", False),
        ("What music does she dislike?", False),
    ],
)
def test_yes_no_questions_are_told_apart(question: str, yes_no: bool) -> None:
    assert is_yes_no(question) is yes_no


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        # the question said back after the "No" contradicts it: only the "No" stays
        (
            "No, Sarah Garcia expressed a liking for romantic comedies on Sep 06, 2025.",
            "No.",
        ),
        # ... and what follows it stays
        (
            "No, Sarah Garcia expressed a liking for romantic comedies on Sep 06, 2025. "
            "She finds them predictable.",
            "No. She finds them predictable.",
        ),
        # a correction is kept whole
        (
            "No, Sarah Garcia does not like romantic comedies.",
            "No, Sarah Garcia does not like romantic comedies.",
        ),
        ("Yes, she did.", "No."),
        ("She dislikes them.", "No. She dislikes them."),
    ],
)
def test_a_no_keeps_what_does_not_say_the_question_again(reply: str, answer: str) -> None:
    assert without_restated_premise(ROMCOM, reply) == answer


def test_word_order_tells_a_correction_from_the_question() -> None:
    q = "Did Sarah Garcia express a preference for spicy Thai dishes over authentic ones?"
    assert restates(
        q, "Sarah Garcia expressed a preference for spicy Thai dishes over authentic ones."
    )
    assert not restates(
        q, "Sarah Garcia expressed a preference for authentic Thai dishes over spicy ones."
    )
    # negated as often as the question: "hadn't received" is the question's own
    q2 = "Would Caroline still want to pursue counseling if she hadn't received support?"
    assert restates(
        q2, "Caroline would still want to pursue counseling if she hadn't received support."
    )


def test_an_unsure_yes_is_asked_again_as_a_no() -> None:
    llm = ScoringLLM(
        0.6,
        [
            "Yes, Sarah Garcia expressed a liking for romantic comedies.",
            "No, she does not like romantic comedies: she finds them predictable.",
        ],
    )
    got = Answerer(llm).answer(ROMCOM, DISLIKE, asked_at=AT)
    assert got.text == "No, she does not like romantic comedies: she finds them predictable."
    assert llm.scored == 1
    first, second = (r["messages"][1]["content"] for r in llm.requests if "options" not in r)
    assert "do not state" not in first and "do not state" in second


def test_a_sure_yes_stands() -> None:
    llm = ScoringLLM(0.9, ["Yes, she likes them."])
    assert Answerer(llm).answer(ROMCOM, DISLIKE, asked_at=AT).text == "Yes, she likes them."
    assert llm.scored == 1 and len(llm.requests) == 2  # the answer, then its scoring


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        (ROMCOM, "No, she dislikes them."),  # a "No" is not checked
        ("What does Sarah think of romantic comedies?", "Yes, she dislikes them."),
    ],
)
def test_only_a_yes_to_a_yes_no_question_is_checked(question: str, reply: str) -> None:
    llm = ScoringLLM(0.1, [reply])
    assert Answerer(llm).answer(question, DISLIKE, asked_at=AT).text == reply
    assert llm.scored == 0


def test_models_that_cannot_score_options_keep_their_yes() -> None:
    llm = ScriptedLLM(["Yes, she likes them."])
    assert not llm.scores_options
    assert Answerer(llm).answer(ROMCOM, DISLIKE, asked_at=AT).text == "Yes, she likes them."
    # and the check can be turned off
    scoring = ScoringLLM(0.1, ["Yes, she likes them."])
    assert Answerer(scoring, yes_cut=None).answer(ROMCOM, DISLIKE, asked_at=AT).text == (
        "Yes, she likes them."
    )
    assert scoring.scored == 0


def test_a_no_that_says_the_question_again_keeps_only_the_no() -> None:
    """Without any check: the model's "No" is its answer, the premise said after it
    contradicts it (the embedded 1.5B, asked of a person who moved Bergen → Oslo)."""
    llm = ScriptedLLM(["No, Ola moved from Oslo to Bergen."])
    got = Answerer(llm).answer("Did Ola move from Oslo to Bergen?", DISLIKE, asked_at=AT)
    assert got.text == "No."
    # a correction differs in a word, and stays; a restatement without the date goes
    q = "Did Martin's perception of wrestling remain negative after the event on May 31, 2030?"
    kept = "No, Martin's perception of wrestling remained positive after the event."
    assert without_restated_premise(q, kept) == kept
    assert (
        without_restated_premise(
            q, "No, Martin's perception of wrestling remained negative after the event."
        )
        == "No."
    )


def test_a_name_of_the_person_no_item_gives_is_not_asked_of_the_model() -> None:
    """Told that no item gives his middle name, the 1.5B still answered "Martin's middle
    name is Mark" (4 of 36 such questions in the dev runs): such a name is not known,
    and the model is not asked."""
    llm = ScriptedLLM(["Martin's middle name is Mark."])
    hits = [hit("Martin Mark is a senior director."), hit("Martin Mark's friend is Joshua.")]
    got = Answerer(llm).answer("What is Martin's middle name as of March 23, 2032?", hits)
    assert got.text == "Not known from memory: no item gives the middle name."
    assert llm.requests == []
    # a name of something else keeps the note, and the model answers: an item may name
    # the thing in other words ("her puppy Rex" for the dog)
    got = Answerer(llm).answer("What is the name of Sarah's dog?", [hit("Sarah's puppy is Rex.")])
    assert got.text == "Martin's middle name is Mark." and len(llm.requests) == 1


def test_an_excerpts_relative_dates_are_written_as_dates_said_after() -> None:
    # AT is 11 March 2031: the 1.5B answerer copied "yesterday" into its answer, and
    # answered "when" with the date that led the line
    facts, excerpts = memory_lines(
        [
            hit("I got engaged yesterday, and we marry next month.", kind="episode"),
            hit("Sarah Garcia got engaged on 10 March 2031."),
        ]
    )
    assert excerpts == [
        "user: I got engaged on 10 March 2031, and we marry in April 2031. (said 11 March 2031)"
    ]
    assert facts == ["Sarah Garcia got engaged on 10 March 2031. (said 11 March 2031)"]
