"""Decomposed judges: what code settles without the model, and how the one-word
checks compose into verdicts (scripted model); the real model is measured by
`deltamem bench agreement` (docs/journal/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import ScoringLLM, ScriptedLLM

from deltamem.bench.judges.base import JudgeCache
from deltamem.bench.judges.checks import abstains, days, other_day, polarity, ranked, restates
from deltamem.bench.judges.decomposed import DecomposedJudges
from deltamem.bench.judges.sets import RubricJudges, make_judges
from deltamem.llm.base import ChatMessage
from deltamem.llm.openai_compat import OpenAICompatLLM


def judges(tmp_path: Path, answer: str | None = None) -> tuple[DecomposedJudges, ScriptedLLM]:
    llm = ScriptedLLM(default={"answer": answer}) if answer else ScriptedLLM()
    return DecomposedJudges(llm, JudgeCache(tmp_path / "c.sqlite")), llm


@pytest.mark.parametrize(
    ("text", "says_unknown"),
    [
        ("I don't know her blood type.", True),
        ("Her middle name is not in my memory.", True),
        ("The memories do not name any specific games.", True),
        ("She is dealing with a health condition, but memory does not say which.", True),
        ("The specific games are unknown.", True),
        ("She was born on March 26, 1986, not in 1985.", False),
        ("No, he was promoted in January 2029.", False),
        ("Horror films.", False),
    ],
)
def test_abstention_is_read_by_code(text: str, says_unknown: bool) -> None:
    assert abstains(text) is says_unknown


def test_days_of_the_year_in_any_format() -> None:
    assert days("On 7 May 2023") == {(5, 7)}
    assert days("She went on May 7th, 2023.") == {(5, 7)}
    assert days("born 1986-03-26") == {(3, 26)}
    assert other_day("7 May 2023", "On 8 May 2023.")
    assert not other_day("7 May 2023", "She went on May 7, 2023.")
    assert not other_day("2022", "last year, in 2022")  # no day named: not code's to say


def test_ranked_keeps_only_items_sharing_a_word() -> None:
    items = ["Ana likes tea.", "Ana works in Porto as a nurse.", "Ana has a cat."]
    assert ranked("Ana is a nurse", items, frozenset({"ana"}), 3) == [items[1]]


def test_qa_settled_in_code_without_the_model(tmp_path: Path) -> None:
    j, llm = judges(tmp_path)  # any model call would fail: ScriptedLLM has no replies
    q = "What is Sarah's blood type?"
    assert j.qa(q, "The information is not provided.", [], "I don't know it.")["verdict"] == (
        "correct"
    )
    assert j.qa(q, "The information is not provided.", [], "Type A.")["verdict"] == (
        "hallucination"
    )
    assert j.qa(q, "AB", [], "")["verdict"] == "omission"
    assert j.qa(q, "AB", [], "Not stated in my memory.")["verdict"] == "omission"
    assert j.qa("Which films?", "Horror films", [], "Horror films.")["verdict"] == "correct"
    # the reference's words, but negated: not settled by containment
    with pytest.raises(AssertionError):
        j.qa("Which films?", "Horror films", [], "Not horror films.")
    assert j.locomo("When?", "7 May 2023", "On 8 May 2023.")["label"] == "WRONG"
    # more detail around every word of the reference: right
    title = "What is her job title?"
    assert j.qa(title, "Manager", [], "She is a manager at Oracle.")["verdict"] == "correct"
    # some of the reference and nothing else: part left out
    assert j.qa(title, "Senior Manager at Oracle", [], "Manager.")["verdict"] == "omission"
    assert len(llm.requests) == 1  # only the negated answer went to the model
    # a word of its own in place of the reference's is the check's to say
    with pytest.raises(AssertionError):
        j.qa(title, "Manager", [], "Director.")


@pytest.mark.parametrize(
    ("said", "qa", "locomo"), [("yes", "correct", "CORRECT"), ("no", "hallucination", "WRONG")]
)
def test_qa_check_answers_compose(tmp_path: Path, said: str, qa: str, locomo: str) -> None:
    j, llm = judges(tmp_path, said)
    q, ref = "What did she research?", "Adoption agencies"
    assert j.qa(q, ref, [], "She looked into how to adopt.")["verdict"] == qa
    assert j.locomo(q, ref, "She looked into how to adopt.")["label"] == locomo
    # one closed question, answered by schema, greedy (this model cannot score options)
    req = llm.requests[0]
    assert req["schema"]["properties"]["answer"]["enum"] == ["yes", "no"]
    assert req["temperature"] == 0.0 and "Reference answer: Adoption agencies" in str(req)


def test_a_yes_no_answer_with_the_other_word_is_wrong_by_code(tmp_path: Path) -> None:
    j, llm = judges(tmp_path)  # any model call would fail: ScriptedLLM has no replies
    q = "Did Martin's mental health improve after his promotion?"
    ref = "No, his mental health status changed to 'Abnormal' due to increased stress."
    assert j.qa(q, ref, [], "Yes, it improved a lot.")["verdict"] == "hallucination"
    assert j.locomo(q, "Yes", "No.")["label"] == "WRONG"
    assert llm.requests == []
    # the same word, the rest only the question said again: answered, nothing added
    assert j.qa(q, ref, [], "No, Martin's mental health did not improve.")["verdict"] == ("correct")
    assert j.qa("Did he like it?", "Yes, very much.", [], "Yes, he liked it.")["verdict"] == (
        "correct"
    )
    assert llm.requests == []
    # otherwise the same word is for the check: "No" can open an answer that then
    # gets it wrong, or says the premise again without negating it
    with pytest.raises(AssertionError):
        j.qa(q, ref, [], "No, it stayed the same.")
    with pytest.raises(AssertionError):
        j.qa(q, ref, [], "No, his mental health improved after his promotion.")
    # not a yes/no question, or an answer that opens otherwise: for the other checks
    assert polarity("What did he say?", "No idea") is None
    assert polarity(q, "Nothing changed") is None
    assert polarity(q, "  no, it did not") == "no"
    assert restates(q, "No, it did not improve.", negative=True)
    assert not restates(q, "No, it improved.", negative=True)
    assert not restates(q, "No, it got worse in 2030.", negative=True)


def test_part_of_a_list_is_an_omission_for_halumem_and_right_for_locomo(tmp_path: Path) -> None:
    j, _ = judges(tmp_path, "no")
    q, ref = "Which films does she like?", "Adventure films and mystery thrillers"
    assert j.qa(q, ref, [], "Adventure films.")["verdict"] == "omission"
    assert j.locomo(q, ref, "Adventure films.")["label"] == "CORRECT"
    assert j.qa(q, ref, [], "Comedies.")["verdict"] == "hallucination"


def test_a_yes_no_answer_with_the_references_word_has_its_own_cut(tmp_path: Path) -> None:
    """After the right yes/no word the check only weighs the rewording of the reason,
    so the cut is lower than for other answers (tuned on the labels' tune half)."""
    j = DecomposedJudges(ScoringLLM(0.32), JudgeCache(tmp_path / "c.sqlite"))
    q = "Did Martin abandon the conservation hikes?"
    ref = "No, he embraced them for his environmental goals."
    got = j.qa(q, ref, [], "No, he is still into conservation efforts and nature walks.")
    assert got["verdict"] == "correct" and "0.32" in got["reason"]
    # the same probability for an answer without the yes/no word: not the same
    assert j.qa(q, ref, [], "He still enjoys nature walks.")["verdict"] == "hallucination"
    low = DecomposedJudges(ScoringLLM(0.2), JudgeCache(tmp_path / "d.sqlite"))
    assert low.qa(q, ref, [], "No, he swapped them for cycling.")["verdict"] == "hallucination"


@pytest.mark.parametrize(("p", "score"), [(0.9, 2), (0.5, 1), (0.1, 0)])
def test_integrity_grades_the_probability(tmp_path: Path, p: float, score: int) -> None:
    llm = ScoringLLM(p)
    j = DecomposedJudges(llm, JudgeCache(tmp_path / "c.sqlite"))
    got = j.integrity(["Ana moved to the coast."], "Ana lives by the sea")
    assert got["score"] == score and f"{p:.2f}" in got["reason"]
    assert llm.requests[0]["options"] == ["yes", "no"] and llm.usage.calls == 1
    # thresholds are the caller's to set (tuned on the labels' tune half)
    strict = DecomposedJudges(
        llm, JudgeCache(tmp_path / "c.sqlite"), thresholds={"covers_full": 0.95}
    )
    assert strict.integrity(["Ana moved to the coast."], "Ana lives by the sea")["score"] == min(
        score, 1
    )


@pytest.mark.parametrize(
    ("memory", "fact", "p", "score"),
    [
        # the check says "fully", but a value of the fact is missing: partly
        (
            "Ana wants to start a charity.",
            "Ana wants to start a charity helping 1 million people",
            0.9,
            1,
        ),
        ("Ana likes classical music.", "Ana likes classical music by Max Richter", 0.9, 1),
        # the check says "partly", but every value is there: fully
        ("Ana is a manager at Oracle.", "Ana works at Oracle", 0.5, 2),
        ("Ana was born on 26 March 1986.", "Ana's birth date is 1986-03-26", 0.5, 2),
        # for a change of value only the new one must be named
        (
            "Ana's health is now 'Abnormal'.",
            "Ana's health changed from 'Mildly Abnormal' to 'Abnormal'",
            0.9,
            2,
        ),
        # without any value the check alone decides
        ("Ana enjoys long walks.", "Ana likes walking in the hills", 0.5, 1),
    ],
)
def test_integrity_weighs_the_facts_exact_values(
    tmp_path: Path, memory: str, fact: str, p: float, score: int
) -> None:
    j = DecomposedJudges(ScoringLLM(p), JudgeCache(tmp_path / "c.sqlite"))
    got = j.integrity([memory], fact)
    assert got["score"] == score, got["reason"]


def test_update_verdicts(tmp_path: Path) -> None:
    old, new = ["Ana's job title is nurse"], "Ana's job title changed from nurse to head nurse."
    j, llm = judges(tmp_path)
    assert j.update(old, new, [])["verdict"] == "omission"
    assert j.update(old, new, ["Bo likes tea."])["verdict"] == "omission"  # nothing shared
    assert llm.requests == []

    def reply(messages: list[ChatMessage]) -> dict[str, Any]:
        memory = messages[1]["content"].rsplit("Memory:", 1)[1]
        if "differ from the new version" in messages[0]["content"]:  # the conflict check
            return {"answer": "yes" if "ward manager" in memory else "no"}
        return {"answer": "yes" if "head nurse" in memory else "no"}

    j2 = DecomposedJudges(ScriptedLLM(default=reply), JudgeCache(tmp_path / "d.sqlite"))
    assert j2.update(old, new, ["Ana is a nurse.", "Ana is now head nurse."])["verdict"] == (
        "correct"
    )
    assert j2.update(old, new, ["Ana is a nurse."])["verdict"] == "omission"
    got = j2.update(old, new, ["Ana is now a ward manager, not a nurse."])
    assert got["verdict"] == "hallucination"


def test_integrity_scores(tmp_path: Path) -> None:
    j, llm = judges(tmp_path)
    assert j.integrity([], "Ana lives in Porto")["score"] == 0
    assert j.integrity(["Ana lives in Porto, Portugal."], "Ana lives in Porto")["score"] == 2
    assert llm.requests == []


def test_accuracy_asks_support_and_field(tmp_path: Path) -> None:
    j, llm = judges(tmp_path, "yes")
    got = j.accuracy(
        ["user: I moved to Porto last year.", "assistant: Lovely city!"],
        ["Ana lives in Porto"],
        "Ana lives in Porto.",
    )
    assert got["score"] == 2 and got["included"] is True
    # the support check sees what the person said, not the assistant
    assert "Lovely city" not in str(llm.requests[0]["messages"])


def test_accuracy_caps_a_value_nobody_said(tmp_path: Path) -> None:
    """A name or number neither the person nor the references name is not "fully"
    supported, whatever the check says; a name written run together
    ("MatthewWilson") or a number with commas counts as said."""
    j = DecomposedJudges(ScoringLLM(0.9), JudgeCache(tmp_path / "c.sqlite"))
    said = ["user: I hold a PhD in Political Science; WilsonMatthew is my friend."]
    refs = ["Ana's monthly income is 15700 yuan"]
    assert j.accuracy(said, refs, "Ana holds a PhD in Sociology.")["score"] == 1
    assert j.accuracy(said, refs, "Ana holds a PhD in Political Science.")["score"] == 2
    assert j.accuracy(said, refs, "Ana's friend Matthew Wilson.")["score"] == 2
    assert j.accuracy(said, refs, "Ana earns 15,700 yuan a month.")["score"] == 2


def test_another_count_or_the_other_option_is_wrong_by_code(tmp_path: Path) -> None:
    j, llm = judges(tmp_path)
    q = "How many children does Ana have?"
    assert j.locomo(q, "3", "She has two kids.")["label"] == "WRONG"
    q = "Would Ana rather visit a national park or a theme park?"
    got = j.locomo(q, "National park; she likes the outdoors", "A theme park, for the rides.")
    assert got["label"] == "WRONG" and "other of the two options" in got["reason"]
    assert llm.requests == []  # settled without the model
    from deltamem.bench.judges.checks import other_choice, other_count

    assert not other_count(q, "3", "She has 3 kids.")
    assert not other_choice(q, "National park", "She would pick a national park.")
    assert not other_choice("Is Ana a teacher?", "Yes", "No")  # no two options


def test_checks_are_cached_and_votes_are_counted(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c.sqlite")
    answers = iter(["no", "yes", "yes"])
    llm = ScriptedLLM(default=lambda _m: {"answer": next(answers)})
    j = DecomposedJudges(llm, cache, votes=3)
    assert (
        j.qa("Q?", "Adoption agencies", [], "Looked into adopting")["verdict"] == "correct"
    )  # 2 of 3
    assert [r["temperature"] for r in llm.requests] == [0.0, 0.8, 0.8]
    again = ScriptedLLM()  # every sample is cached now
    assert DecomposedJudges(again, cache, votes=3).qa(
        "Q?", "Adoption agencies", [], "Looked into adopting"
    )
    assert again.requests == []


def test_mode_follows_the_model(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c.sqlite")
    assert isinstance(make_judges(ScriptedLLM(), cache), DecomposedJudges)
    hosted = OpenAICompatLLM("http://127.0.0.1:9/v1", "m")
    assert isinstance(make_judges(hosted, cache), RubricJudges)
    assert isinstance(make_judges(ScriptedLLM(), cache, "rubric"), RubricJudges)
    with pytest.raises(ValueError, match="judge mode"):
        make_judges(ScriptedLLM(), cache, "vibes")


def test_an_update_written_as_a_change_of_value_is_settled_by_code() -> None:
    from deltamem.bench.judges.decomposed import changed_value

    income = 'Martin\'s career_status updated monthly_income from "15700" to "18000" yuan.'
    assert changed_value(income, ["Martin earns 18000 yuan a month."])["verdict"] == "correct"
    assert changed_value(income, ["Martin earns 19000 yuan a month."])["verdict"] == (
        "hallucination"
    )
    assert changed_value(income, ["Martin earns 15700 yuan a month."])["verdict"] == "omission"
    health = "Ana's mental health status changed from 'Abnormal' to 'Normal'."
    # another field's own change names 'Normal' as its old value: not the new one here
    assert changed_value(
        health,
        ["Ana's mental health: Abnormal", "Ana's physical health went from 'Normal' to 'Good'."],
    ) == {"verdict": "omission", "reason": "only the old value 'Abnormal' is named (code)"}
    title = "Ana's job_title changed from 'director' to 'senior director'."
    # old and new both stated as current: the checks decide
    assert changed_value(title, ["Ana is a director.", "Ana is a senior director."]) is None
    assert changed_value("Ana now likes jazz.", ["Ana likes jazz."]) is None  # not this form


def test_information_points_split_sentences_and_clauses() -> None:
    """HaluMem's rubric asks of each information point whether the references have
    its field: a clause after "and" is a point of its own; a list is not."""
    from deltamem.bench.judges.checks import information_points

    assert information_points(
        "Martin Mark was promoted to Senior Director and plans to leave Huaxin Consulting."
    ) == [
        "Martin Mark was promoted to Senior Director",
        "Martin Mark plans to leave Huaxin Consulting.",
    ]
    # sentences as written: no pronoun is resolved (the judges own no atomiser)
    assert information_points("Ana is 39. She lives in Porto and works at a clinic.") == [
        "Ana is 39.",
        "She lives in Porto",
        "She works at a clinic.",
    ]
    listed = "Ana shares her recipes with friends, colleagues and neighbours."
    assert information_points(listed) == [listed]


class PointScoringLLM(ScoringLLM):
    """P(yes) 0.1 for a check whose detail names `unheld`, else 0.9."""

    def __init__(self, unheld: str) -> None:
        super().__init__(0.9)
        self.unheld = unheld

    def _options(self, messages, options, *, timeout):  # type: ignore[no-untyped-def]
        detail = messages[-1]["content"].split("\n")[0]
        self.p = 0.1 if self.unheld in detail else 0.9
        return super()._options(messages, options, timeout=timeout)


def test_included_needs_a_field_for_every_point(tmp_path: Path) -> None:
    """A point the check finds no reference for makes the memory not included,
    however sure it is about the other points; a point worded apart from its
    reference is found by meaning, with no call."""
    refs = [
        "Ana's job title is nurse at Porto General Hospital",
        "Ana's partner status: divorced",
        "Ana likes green tea",
        "Ana runs on Sundays",
    ]  # four or more: the name they all share is no clue
    said = ["user: I'm a nurse at Porto General, and I'm divorced."]
    j = DecomposedJudges(PointScoringLLM("stamps"), JudgeCache(tmp_path / "c.sqlite"))
    assert j.accuracy(said, refs, "Ana is a nurse at Porto General Hospital.")["included"] is True
    got = j.accuracy(
        said, refs, "Ana is a nurse at Porto General Hospital and owns vintage stamps."
    )
    assert got["included"] is False
    j2 = DecomposedJudges(ScoringLLM(0.01), JudgeCache(tmp_path / "c2.sqlite"))
    assert j2.accuracy(said, refs, "Ana is divorced.")["included"] is True


def _included(
    tmp_path: Path, p_yes: float, refs: list[str], said: str, memory: str
) -> tuple[bool, list[str]]:
    """The `included` flag of `memory`, its check scripted to P(yes) `p_yes`, and the
    details the check was asked about."""
    llm = ScoringLLM(p_yes)
    j = DecomposedJudges(llm, JudgeCache(tmp_path / f"{memory}.sqlite"))
    got = j.accuracy([f"user: {said}"], refs, memory)["included"]
    asked = [r["messages"][-1]["content"] for r in llm.requests]
    details = [a.split("\n")[0].removeprefix("Detail: ") for a in asked if a.startswith("Detail:")]
    return got, details


def test_included_asks_about_the_references_nearest_in_meaning(tmp_path: Path) -> None:
    """In a session about one topic every reference shares its word, which the word
    ranking skips; the references nearest in meaning are asked about instead of
    none (in a music session, "enjoys music" was called not included)."""
    refs = [
        "Ana's music preference includes jazz, which relaxes her",
        "Ana listens to music while cooking",
        "Ana values music for its calm",
        "Ana seeks music recommendations for her evening walks",
    ]
    memory = "Ana finds music helps her sleep"  # cosine under 0.75 to each
    included, asked = _included(tmp_path, 0.9, refs, "Music helps me sleep.", memory)
    assert included is True
    assert memory in asked, "the check was asked about the references nearest in meaning"


def test_included_when_a_reference_holds_every_word_of_the_point(tmp_path: Path) -> None:
    """A point whose every word (the name aside) is in one reference has that field,
    with no call, however the check would lean; one word the references lack
    leaves it to the check."""
    refs = [
        "Ana's colleague Rui has been supporting her through the move",
        "Ana values her friends at work",
        "Ana likes green tea",
        "Ana runs on Sundays",
    ]
    said = "My colleagues support me a lot."
    included, asked = _included(tmp_path, 0.01, refs, said, "Ana has support from her colleagues")
    assert included is True and not asked
    assert _included(tmp_path, 0.01, refs, said, "Ana has support from her neighbours")[0] is False


def test_a_negated_answer_to_a_question_about_a_dislike_is_no_contradiction(
    tmp_path: Path,
) -> None:
    """An answer "does not like heavy metal" to "What music does she dislike?" has the
    reference's words and agrees with it; elsewhere a negation next to them contradicts
    it, and the check decides (scripted here to say no)."""
    j = DecomposedJudges(ScoringLLM(0.01), JudgeCache(tmp_path / "c.sqlite"))
    got = j.qa("What music does Ana dislike?", "Heavy metal", [], "Ana does not like heavy metal.")
    assert got["verdict"] == "correct" and "(code)" in got["reason"]
    got = j.qa("What music does Ana like?", "Heavy metal", [], "Ana does not like heavy metal.")
    assert got["verdict"] == "hallucination"


def test_a_negation_counts_against_only_its_own_clause(tmp_path: Path) -> None:
    """ "No, it was jazz, not rock" holds the reference's "jazz" outside the clause its
    "not" denies, so it is right with no call; the same words under the negation
    ("it was not jazz") are for the check (scripted here to say no)."""
    j = DecomposedJudges(ScoringLLM(0.01), JudgeCache(tmp_path / "c.sqlite"))
    q = "Did Ana find rock music calming at work?"
    ref = "No, Ana found jazz calming, not rock music."
    got = j.qa(q, ref, [], "No, it was jazz, not rock, that she found calming.")
    assert got["verdict"] == "correct" and "(code)" in got["reason"]
    got = j.qa("Where did Ana work in 2025?", "Oracle", [], "She didn't work at Microsoft; Oracle.")
    assert got["verdict"] == "correct" and "(code)" in got["reason"]
    got = j.qa("Where did Ana work in 2025?", "Oracle", [], "She did not work at Oracle.")
    assert got["verdict"] == "hallucination" and "check" in got["reason"]


def test_an_answer_sharing_no_word_with_the_reference_needs_a_surer_check(
    tmp_path: Path,
) -> None:
    """The check passes a topical answer ("more narrative-driven games" for "story-rich
    books") at P 0.7-0.8; with no word of the reference in it (the question's words
    aside) an answer needs the higher cut, one that shares a word does not."""
    j = DecomposedJudges(ScoringLLM(0.75), JudgeCache(tmp_path / "c.sqlite"))
    q = "What might Ana explore next, given her love of narrative games?"
    ref = "Story-rich books or immersive theater."
    got = j.qa(q, ref, [], "She might explore more narrative games.")
    assert got["verdict"] == "hallucination" and "no word of the reference" in got["reason"]
    got = j.qa(q, ref, [], "She might read novels with rich stories.")
    assert got["verdict"] == "correct" and "no word" not in got["reason"]


def test_a_no_that_says_the_question_back_negated_is_only_the_no(tmp_path: Path) -> None:
    """ "No, Ana did not switch to casual attire. She chose smart-casual attire." claims
    what the second sentence says; the negation of the first is the "No" itself,
    so the reference's words found in the second settle it with no call."""
    j = DecomposedJudges(ScoringLLM(0.01), JudgeCache(tmp_path / "c.sqlite"))
    q = "Did Ana switch to casual attire in May 2025?"
    ref = "No, Ana switched to smart-casual attire."
    said = "No, Ana did not switch to casual attire in May 2025. She chose smart-casual attire."
    got = j.qa(q, ref, [], said)
    assert got["verdict"] == "correct" and "(code)" in got["reason"]
    got = j.qa(q, ref, [], "No, Ana did not switch to casual attire. She kept formal suits.")
    assert got["verdict"] == "hallucination"


def test_accuracy_applies_none_of_the_products_write_rules(tmp_path: Path) -> None:
    """The judge owes nothing to the product: a label nobody used ("a personal growth
    advocate") or a clause said of someone else is for the support check to weigh,
    not refused by the manager's own rules (which the judges no longer import)."""
    j = DecomposedJudges(ScoringLLM(0.9), JudgeCache(tmp_path / "c.sqlite"))
    said = ["user: Personal growth will guide me. I hike every weekend."]
    refs = ["Ana values personal growth", "Ana hikes on weekends"]
    got = j.accuracy(said, refs, "Ana is a personal growth advocate.")
    assert got["score"] == 2 and got["reason"] == "check: supported p 0.90"
    assert j.accuracy(said, refs, "Ana is a hiker.")["score"] == 2
    said = ["user: I joined Oracle in May. It encourages innovation."]
    got = j.accuracy(said, ["Ana works at Oracle"], "Ana encourages innovation.")
    assert got["score"] == 2 and "(code)" not in got["reason"]


def test_a_hedged_reference_has_its_yes_or_no(tmp_path: Path) -> None:
    """LoCoMo writes "Likely no; ..." for a reference: a "Yes" is then the other word,
    whatever a lenient check says of the topic (it passed "Yes, Melanie would go on
    another roadtrip soon" against "Likely no; since this one went badly")."""
    llm = ScoringLLM(0.9)
    j = DecomposedJudges(llm, JudgeCache(tmp_path / "c.sqlite"))
    q = "Would Melanie go on another roadtrip soon?"
    ref = "Likely no; since this one went badly"
    assert j.locomo(q, ref, "Yes, Melanie would go on another roadtrip soon.")["label"] == "WRONG"
    assert j.locomo(q, "LIkely no", "No.")["label"] == "CORRECT"
    assert llm.requests == []  # both settled in code


def test_the_bare_word_answers_a_yes_no_question(tmp_path: Path) -> None:
    """ "No." for "No, she prefers authentic dishes": the question is answered and nothing
    is claimed beyond it, as "No, he did not abandon them" for "No, he embraced them"."""
    llm = ScoringLLM(0.1)
    j = DecomposedJudges(llm, JudgeCache(tmp_path / "c.sqlite"))
    q = "Did Sarah prefer spicy Thai dishes over authentic ones?"
    ref = "No, she prefers authentic Thai dishes over spicy ones."
    assert j.qa(q, ref, [], "No.")["verdict"] == "correct"
    assert j.qa(q, ref, [], "Yes.")["verdict"] == "hallucination"
    assert llm.requests == []
