"""The answerer's prompt: the thing a question asks for, and the note said when no
retrieved item names it (a small answerer otherwise answers a middle name with the
name of a friend)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deltamem.answer import Answerer, asked_thing, unmentioned
from deltamem.types import MemoryItem, SearchHit
from tests.fakes import ScriptedLLM

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
