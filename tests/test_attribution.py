"""Facts the person said of someone else are refused (deltamem/manager/attribution.py)."""

from __future__ import annotations

import pytest

from deltamem.manager.extract import check_fact
from deltamem.rules.attribution import clause_subject, said_of_another, subjects

PRIYA = "Priya Raman"
S1 = (
    "It's fine. Outside work I'm learning Portuguese, because my partner Tomás is from "
    "Lisbon. And I have a cat called Miso."
)


@pytest.mark.parametrize(
    ("clause", "who"),
    [
        ("I live in Leeds", "self"),
        ("Outside work I'm learning Portuguese", "self"),
        ("she already sleeps on the new sofa", "other"),
        ("you suggested a course", "other"),
        ("my network provided emotional support", "other"),
        ("Oracle's culture encourages innovation", "other"),
        ("It's fine", None),  # "it" stands for nothing said of another
        ("It encourages innovation", "other"),
        ("It helps me set clear goals", "self"),  # the person is in it
        ("my major is Political Science", None),  # an attribute of theirs
        ("Miso is fine", None),
        ("half an hour every evening", None),
        # someone named, doing something; a noun or a place in a state is not someone
        ("Nora picked the name", "other"),
        ("Tomás cooks every night", "other"),
        ("Kyoto was magical", None),
        ("Pottery relaxes after work", None),
        ("The tools need to be user-friendly", None),
    ],
)
def test_who_a_clause_is_about(clause: str, who: str | None) -> None:
    assert clause_subject(clause) == who


def test_a_clause_without_a_subject_continues_the_one_before_it() -> None:
    said = "Oracle's culture encourages innovation and provides resources. I love it."
    assert subjects(said) == [
        ("Oracle's culture encourages innovation provides resources", "other"),
        ("I love it", "self"),
    ]


@pytest.mark.parametrize(
    ("fact", "said", "why"),
    [
        (
            "Priya Raman already sleeps on the new sofa",
            "Miso is fine, she already sleeps on the new sofa.",
            "said of someone else, not the person",
        ),
        (
            "Priya Raman provided diverse perspectives and emotional support",
            "My network provided diverse perspectives and emotional support during the move.",
            "said of someone else, not the person",
        ),
        (
            "Priya Raman encourages innovation and provides resources for growth",
            "Oracle's culture encourages innovation and provides resources for growth.",
            "said of someone else, not the person",
        ),
        (
            "Priya Raman takes the dog to the vet every month",
            "My sister takes him to the vet every month.",
            "said of someone else, not the person",
        ),
        (
            "Priya Raman is a social network provider",
            "My social network provides diverse perspectives.",
            "said of someone else, not the person",
        ),
        (
            "Priya Raman is near her family",
            "We want to marry in Lisbon next summer, near his family.",
            "someone else's family, not the person's",
        ),
    ],
)
def test_what_was_said_of_another_is_refused(fact: str, said: str, why: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, why)


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        ("Priya Raman is learning Portuguese", S1),
        ("Priya Raman has a cat called Miso", S1),
        ("Priya Raman's partner Tomás is from Lisbon", S1),  # the partner is the subject
        ("Priya Raman plans to marry in Lisbon next summer", "We marry in Lisbon next summer"),
        ("Priya Raman owns a dance studio by the river", "My dance studio is by the river."),
        ("Priya Raman helps her sister with homework", "I help my sister with her homework."),
        ("Priya Raman loves working at Oracle", "Oracle is great and I love working there."),
        (
            "Priya Raman has a PhD in Political Science",
            "My level is PhD, my major is Political Science.",
        ),
        (
            "Priya Raman likes adventure novels because they transport her to new worlds",
            "I like adventure novels, because they transport me to new worlds.",
        ),
        ("Priya Raman sets clear goals", "Vision guides me. It helps me set clear goals."),
        (
            "Priya Raman creates a supportive environment",
            "It's about creating a supportive environment.",
        ),
        ("Priya Raman feels more confident at work", "It feels like I'm more confident at work."),
        (
            "Priya Raman is a Senior Director",
            "I've been overwhelmed since my promotion to Senior Director.",
        ),
        # "their support" may well be the person's network's, "your" a generic you
        ("Priya Raman is grateful for his support network", "I'm grateful for their support."),
    ],
)
def test_what_the_person_said_of_themselves_is_kept(fact: str, said: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, None)


def test_a_fact_of_too_few_shared_words_is_not_judged() -> None:
    # one word in common of two says nothing about which clause the fact came from
    assert said_of_another("Priya Raman is tired after work", PRIYA, "She is tired.") is None


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        # a fact of one content word: the clause that holds it is its source
        ("Priya Raman is tired", "She is tired."),
        (
            "Priya Raman is from Lagos",
            "My sister Amara came to cheer me on. She's getting married in Lagos next month.",
        ),
        ("Priya Raman has potential", "Don't let anything stop you. You have potential!"),
    ],
)
def test_a_fact_of_one_word_is_read_in_the_clause_that_holds_it(fact: str, said: str) -> None:
    assert said_of_another(fact, PRIYA, said) == "said of someone else, not the person"


def test_a_fact_of_one_word_said_of_oneself_stays() -> None:
    assert said_of_another("Priya Raman is tired", PRIYA, "I am so tired.") is None


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        (
            "Priya Raman measures success through team feedback",
            "I'll measure success through team feedback and morale.",
        ),
        ("Priya Raman is married in Lisbon", "We want to marry in Lisbon next summer."),
        # one content word ("someone" names nothing): its clause is where that word is
        (
            "Priya Raman is married to someone",
            "We want to marry in Lisbon next summer, near his family.",
        ),
        (
            "Priya Raman encourages community engagement through simplicity",
            "I hope to encourage community engagement through simplicity.",
        ),
    ],
)
def test_a_wish_or_plan_written_as_done_is_refused(fact: str, said: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, "a wish or plan written as done")


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        # the fact keeps the plan
        (
            "Priya Raman plans to measure success through feedback",
            "I'll measure success through feedback.",
        ),
        # the income comes before the "will", which is about something else
        ("Priya Raman earns 18,000 USD a month", "The raise to 18,000 USD a month will help."),
        (
            "Priya Raman moved from Leeds to Manchester",
            "Last week I moved from Leeds to Manchester.",
        ),
        # "continue" and "keep": it goes on already
        (
            "Priya Raman is experimenting with superfoods",
            "I'll continue experimenting with superfoods.",
        ),
        ("Priya Raman is looking to grow personally", "I hope to grow personally."),
        # keenness is a feeling now, not a plan
        ("Priya Raman enjoys horror films", "I'm actually excited to explore more horror films."),
    ],
)
def test_what_is_done_or_kept_as_a_plan_stays(fact: str, said: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, None)


OPENER = (
    "I'd like to share my Movie Preference with you so you can understand my personal preferences."
)


def test_a_dislike_read_into_a_request_is_refused() -> None:
    # "I'd like to share ..." asks something and voices no taste (HaluMem's openers)
    fact = "Priya Raman dislikes movies"
    assert check_fact(fact, PRIYA, OPENER, None) == (
        fact,
        "a request ('I'd like to ...') read as a dislike",
    )


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        # a taste voiced beside the request
        ("Priya Raman dislikes raw fish", "I'd love to try sushi, but I hate raw fish."),
        (
            "Priya Raman doesn't like horror films",
            "I can't stand horror films, so I'd like some tips on comedies.",
        ),
        # no request: the rule is not about dislikes in general
        ("Priya Raman dislikes formal wear", "Formal wear always felt cumbersome and restrictive."),
    ],
)
def test_a_dislike_voiced_or_without_a_request_stays(fact: str, said: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, None)


@pytest.mark.parametrize(
    ("fact", "said", "name"),
    [
        # another person's wedding told in passing
        (
            "Priya Raman is married to Amara",
            "My sister Amara came to cheer me on. She's getting married in Lagos next month.",
            "Amara",
        ),
        # the friend she is talking to (LoCoMo conv-30)
        ("Priya Raman has a wife named Gina", "Yeah, Gina, thanks for having my back.", "Gina"),
        ("Priya Raman's wife is Gina", "Thanks Gina! How long have you been married?", "Gina"),
    ],
)
def test_a_spouse_the_person_did_not_name_is_refused(fact: str, said: str, name: str) -> None:
    why = f"a spouse or partner the person did not name ({name})"
    assert check_fact(fact, PRIYA, said, None) == (fact, why)


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        ("Priya Raman is engaged to Tomás", "Tomás and I got engaged yesterday!"),
        ("Priya Raman is married to her partner", "Marrying my partner was the best part."),
        ("Priya Raman's wife, Ana, likes hiking", "My wife, Ana, and I went hiking."),
    ],
)
def test_a_spouse_named_as_such_stays(fact: str, said: str) -> None:
    assert check_fact(fact, PRIYA, said, None) == (fact, None)


def test_what_a_named_other_did_is_not_the_persons() -> None:
    said = "We adopted a cat yesterday, a grey tabby named Biscuit. Nora picked the name."
    fact = "Priya Raman picked the name Nora for the cat"
    assert check_fact(fact, PRIYA, said, None) == (fact, "said of someone else, not the person")
    kept = "Priya Raman adopted a grey tabby named Biscuit"
    assert check_fact(kept, PRIYA, said, None) == (kept, None)
