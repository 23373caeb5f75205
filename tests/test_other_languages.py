"""Whose words in Spanish, German and French (`deltamem.rules.other_languages`)."""

from __future__ import annotations

import pytest

from deltamem.rules import check
from deltamem.rules.other_languages import first_person_verb, said_of_relative

SPANISH = (
    "Toco la guitarra flamenca y salgo a correr por el parque de María Luisa. "
    "Mi hermana Lucía es médica en Granada."
)
NEWS = (
    "¡Grandes noticias! Dejé el hospital de Sevilla y ahora trabajo como enfermera en el "
    "Hospital La Paz de Madrid."
)
GERMAN = (
    "Ich spiele Cello in einem kleinen Orchester und trinke jeden Morgen zwei Tassen "
    "Kaffee. Mein Bruder Jonas ist Koch in Hamburg."
)
FRENCH = "Je travaille comme infirmière à Lyon. Ma sœur est médecin à Lyon aussi."


@pytest.mark.parametrize(
    ("fact", "subject", "said", "verb"),
    [
        ("Ana Ruiz toco la guitarra flamenca", "Ana Ruiz", SPANISH, "toco"),
        ("Ana Ruiz salgo a correr por el parque", "Ana Ruiz", SPANISH, "salgo"),
        ("Ana Ruiz ahora trabajo en el Hospital La Paz", "Ana Ruiz", NEWS, "trabajo"),
        ("Lena Vogel spiele Cello in einem Orchester", "Lena Vogel", GERMAN, "spiele"),
        ("Lena Vogel trinke jeden Morgen Kaffee", "Lena Vogel", GERMAN, "trinke"),
        # the third persons, and a past in -ó, are no first person
        ("Ana Ruiz toca la guitarra flamenca", "Ana Ruiz", SPANISH, None),
        ("Ana Ruiz dejó el hospital de Sevilla", "Ana Ruiz", NEWS, None),
        ("Lena Vogel spielt Cello in einem Orchester", "Lena Vogel", GERMAN, None),
        # a word in -o the person did not say is the model's, not the speaker's verb
        ("Ana Ruiz pinto cuadros", "Ana Ruiz", SPANISH, None),
    ],
)
def test_the_speakers_first_person_verb_is_found(
    fact: str, subject: str, said: str, verb: str | None
) -> None:
    language = "de" if said is GERMAN else "es"
    assert first_person_verb(fact, subject, said, language) == verb


def test_a_first_person_verb_is_refused_as_first_person() -> None:
    verdict = check("Ana Ruiz toco la guitarra flamenca", "Ana Ruiz", SPANISH, None)
    assert verdict.refused is not None and verdict.refused.code == "FIRST_PERSON"
    assert check("Ana Ruiz toca la guitarra flamenca", "Ana Ruiz", SPANISH, None).kept


@pytest.mark.parametrize(
    ("fact", "subject", "said", "language"),
    [
        ("Ana Ruiz es médica en Granada", "Ana Ruiz", SPANISH, "es"),
        ("Lena Vogel ist Koch in Hamburg", "Lena Vogel", GERMAN, "de"),
        ("Marie est médecin à Lyon", "Marie", FRENCH, "fr"),
    ],
)
def test_what_was_said_of_a_relative_is_not_the_persons(
    fact: str, subject: str, said: str, language: str
) -> None:
    assert said_of_relative(fact, subject, said, language) is not None
    verdict = check(fact, subject, said, None)
    assert verdict.refused is not None and verdict.refused.code == "ATTRIBUTED_TO_OTHER"


@pytest.mark.parametrize(
    ("fact", "subject", "said"),
    [
        # the relative named, by the word or by the name
        ("Ana Ruiz tiene una hermana llamada Lucía", "Ana Ruiz", SPANISH),
        ("Lena Vogels Bruder Jonas ist Koch in Hamburg", "Lena Vogel", GERMAN),
        # the person's own sentence beside the relative's
        ("Marie travaille comme infirmière à Lyon", "Marie", FRENCH),
    ],
)
def test_the_relative_named_or_the_persons_own_clause_is_kept(
    fact: str, subject: str, said: str
) -> None:
    assert check(fact, subject, said, None).kept


@pytest.mark.parametrize(
    ("fact", "subject", "said"),
    [
        ("Ana vive en Lisboa", "Ana", "Me encantaría vivir en Lisboa algún día, pero no ahora."),
        ("Lena Vogel lebt in Wien", "Lena Vogel", "Ich würde gern irgendwann in Wien leben."),
        ("Marie habite à Rome", "Marie", "J'aimerais bien habiter à Rome un jour."),
    ],
)
def test_a_wish_written_as_done_is_refused(fact: str, subject: str, said: str) -> None:
    verdict = check(fact, subject, said, None, trace=True)
    assert "PLAN_AS_DONE" in verdict.fired


@pytest.mark.parametrize(
    ("fact", "subject", "said"),
    [
        ("Ana quiere vivir en Lisboa algún día", "Ana", "Me encantaría vivir en Lisboa algún día."),
        (
            "Lena Vogel möchte in Wien leben",
            "Lena Vogel",
            "Ich würde gern irgendwann in Wien leben.",
        ),
        # a liking ("gern") is no wish
        ("Lena Vogel spielt gern Cello", "Lena Vogel", "Ich spiele gern Cello im Orchester."),
    ],
)
def test_a_wish_kept_as_a_wish_is_kept(fact: str, subject: str, said: str) -> None:
    assert "PLAN_AS_DONE" not in check(fact, subject, said, None, trace=True).fired


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Bonjour, je suis Claire Dubois. Je suis pharmacienne à Lyon.", "Claire Dubois"),
        ("Salut, je suis Élodie.", "Élodie"),
        ("Hola, soy Ana Ruiz.", "Ana Ruiz"),
        ("Hallo, ich bin Lena.", "Lena"),
        ("I'm Zoë.", "Zoë"),
        # a word alone that is no first name names nobody
        ("Je suis Française et je vis à Paris.", None),
        ("Ich bin Deutscher.", None),
        ("Je suis pharmacienne à Lyon.", None),
    ],
)
def test_a_self_introduction_names_the_person(said: str, name: str | None) -> None:
    from deltamem.manager.extract import introduced_name

    assert introduced_name([said]) == name
