"""The person's own sentence told in the third person (deltamem/manager/voice.py),
and a fact that ends what a memory names (deltamem/manager/resolve.py)."""

from __future__ import annotations

import pytest

from deltamem.manager.resolve import decided_in_code, ended_values
from deltamem.manager.voice import in_third_person


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("I work as a nurse in Bergen.", "Ola works as a nurse in Bergen."),
        ("I'm a teacher", "Ola is a teacher"),
        ("I've started dating Alex.", "Ola has started dating Alex."),
        ("I'll continue to paint.", "Ola will continue to paint."),
        ("I'd like to learn Spanish", "Ola would like to learn Spanish"),
        ("I'd been there before", "Ola had been there before"),
        ("I really love my cat", "Ola really loves their cat"),
        ("I try to run", "Ola tries to run"),
        ("I don't like horror films", "Ola doesn't like horror films"),
        # one form for present and past: left as it is, which reads as the past
        ("I quit Haukeland Hospital last month.", "Ola quit Haukeland Hospital last month."),
        ("I moved to Oslo.", "Ola moved to Oslo."),
        # a subject of two keeps its plural verb
        ("Sam and I broke up.", "Sam and Ola broke up."),
        ("My sister and I watch films", "Their sister and Ola watch films"),
        ("I love cats and I have two", "Ola loves cats and Ola has two"),
        ("It helps me relax because I paint", "It helps them relax because Ola paints"),
    ],
)
def test_the_persons_words_are_told_of_them(said: str, told: str) -> None:
    assert in_third_person(said, "Ola") == told


@pytest.mark.parametrize(
    "said",
    [
        "We sail every summer.",  # who "we" are is not said
        "I'd like to share my Travel Preference with you.",  # talk to the assistant
        "Ola lives in Oslo.",  # no "I" to tell
    ],
)
def test_what_is_not_told(said: str) -> None:
    assert in_third_person(said, "Ola") is None


def test_the_user_inside_a_sentence_is_lower_case() -> None:
    assert in_third_person("Sam and I broke up.", "The user") == "Sam and the user broke up."


@pytest.mark.parametrize(
    ("fact", "ended"),
    [
        ("Priya left Northwind Bank and joined Fernhill Labs", {"northwind", "bank"}),
        ("Jun resigned from Westfield School in May", {"westfield", "school"}),
        ("Lena stopped playing with the Riverside Rovers", {"riverside", "rovers"}),
        ("Tom moved out of the King Street flat", {"king", "street"}),
        ("Sam and Mia broke up in the spring", {"sam"}),
        ("Sarah left her job", set()),  # what ended is not named
        ("Tom left a review for Cafe Nero", set()),  # nor is it the named thing
        ("Priya works at Northwind Bank", set()),
    ],
)
def test_what_a_fact_says_has_ended(fact: str, ended: set[str]) -> None:
    name = fact.split()[0] if not fact.startswith("Sam") else "Mia"
    assert ended_values(fact, name) == ended


def test_a_fact_that_ends_a_memory_replaces_it() -> None:
    known = ["Priya loves maths", "Priya works as a data analyst at Northwind Bank"]
    assert decided_in_code("Priya left Northwind Bank", known, "Priya") == "ends 2"
    # an ended thing ends nothing that is itself an ending, nor what it does not name
    assert decided_in_code("Priya left Northwind Bank", ["Priya left Northwind Bank in May"],
                           "Priya") != "ends 1"  # fmt: skip
    assert decided_in_code("Priya left Northwind Bank", ["Priya works at Fernhill"], "Priya") == (
        "new"
    )
