"""Whose words, in Spanish, German and French: two checks the English rules make by
reading English grammar, made here by a few closed word classes of each language.

* **The speaker's verb copied into the fact.** Asked for facts in the message's
  language, the 1.5B keeps the speaker's first-person verb after the person's name
  ("Toco la guitarra flamenca" -> "Ana Ruiz toco la guitarra flamenca"; "Ich spiele
  Cello" -> "Lena Vogel spiele Cello"). Spanish's present first person ends in an
  unstressed -o ("trabajo", "salgo"; "soy", "estoy", "voy", "doy"), its past third
  person in a stressed -ó ("dejó"); German's present first person in -e ("spiele",
  "wohne"), which no third person of the present has. Read only where the word is
  one the person said. French is left out: "travaille" is both persons.
* **A wish written as done.** "Me encantaría vivir en Lisboa algún día" -> "Ana Ruiz
  vive en Lisboa": where every clause the fact was made from holds a word of wish or
  plan ("gustaría", "algún día"; "möchte", "irgendwann"; "voudrais", "un jour") and the
  fact holds none, it is refused.
* **What was said of the speaker's relative or friend.** "Mi hermana Lucía es médica
  en Granada" -> "Ana Ruiz es médica en Granada": where every clause the fact was made
  from opens with the speaker's someone ("mi hermana", "mein Bruder", "ma sœur") and
  the fact names neither that someone nor the name after it, it is not the person's.
"""

from __future__ import annotations

import re

from deltamem.rules import grounding, whose
from deltamem.rules.base import Outcome
from deltamem.rules.pipeline import FactInput
from deltamem.rules.sources import sources
from deltamem.text import words

# Spanish first persons of the present that do not end in -o, and words in -o that
# may follow a name and are no verb
_ES_FIRST_IRREGULAR = frozenset("soy estoy voy doy".split())
_ES_NOT_VERBS = frozenset(
    "no solo sólo pronto luego mucho poco tanto todo como cuando algo tampoco casi "
    "demasiado primero".split()
)
# German forms in -e that are third persons too: the subjunctive and the past of the
# auxiliaries and modals ("Lena würde gern ...", "Lena hatte ..."); a weak past in -te
# ("spielte") is both persons as well
_DE_BOTH_PERSONS = frozenset(
    "würde wäre hätte möchte könnte müsste dürfte sollte wollte hatte konnte musste "
    "durfte mochte wurde".split()
)
# what may stand between the person's name and the verb
_BEFORE_VERB = {
    "es": frozenset("no ya también todavía aún siempre nunca ahora se".split()),
    "de": frozenset("nicht auch jetzt noch schon immer nie gern gerne".split()),
}

_MINE = {
    "es": frozenset("mi mis nuestro nuestra nuestros nuestras".split()),
    "de": frozenset(
        "mein meine meinem meinen meiner meines unser unsere unserem unseren unserer".split()
    ),
    "fr": frozenset("mon ma mes notre nos".split()),
}
# the speaker's people: relatives, partners, friends, the people they work with
_PEOPLE = {
    "es": frozenset(
        "hermana hermano hermanas hermanos madre padre padres mamá papá hijo hija hijos "
        "hijas esposo esposa marido mujer novio novia pareja amigo amiga amigos amigas "
        "jefe jefa compañero compañera compañeros compañeras vecino vecina primo prima "
        "tío tía abuelo abuela abuelos sobrino sobrina suegro suegra cuñado cuñada".split()
    ),
    "de": frozenset(
        "bruder schwester brüder schwestern mutter vater eltern mama papa sohn tochter "
        "söhne töchter kind kinder mann frau ehemann ehefrau freund freundin freunde "
        "freundinnen partner partnerin chef chefin kollege kollegin kollegen nachbar "
        "nachbarin cousin cousine onkel tante oma opa großmutter großvater neffe "
        "nichte".split()
    ),
    "fr": frozenset(
        "frère sœur soeur frères sœurs soeurs mère père parents maman papa fils fille "
        "filles enfant enfants mari femme copain copine ami amie amis amies partenaire "
        "patron patronne chef collègue collègues voisin voisine cousin cousine oncle "
        "tante neveu nièce".split()
    ),
}
# words of a wish, a plan or a someday, in what was said or in the fact
_WISH = {
    "es": re.compile(
        r"\b(?:gustar[íi]a|encantar[íi]a|quier[eo]|quiere[ns]?|quisiera|querr[íi]a|"
        r"esper[oa]|ojal[áa]|sueñ[oa]|planea|planeo|piens[oa]|desea|deseo|alg[úu]n d[íi]a|"
        r"futuro|pronto)\b",
        re.IGNORECASE,
    ),
    "de": re.compile(
        r"\b(?:möchte|möchten|würde|würden|will|wollte|hoffe|hofft|irgendwann|"
        r"eines tages|plane|plant|träume|träumt|wünsche|wünscht|vielleicht|bald)\b",
        re.IGNORECASE,
    ),
    "fr": re.compile(
        r"\b(?:aimerais|aimerait|voudrais|voudrait|veux|veut|esp[èe]re|r[êe]ve|un jour|"
        r"compte|souhaite|souhaiterais|souhaiterait|projette|bient[ôo]t)\b",
        re.IGNORECASE,
    ),
}
# a conjunction before the someone ("y mi hermana ...", "und mein Bruder ...")
_JOINING = frozenset("y e pero und aber et mais".split())


def _after_name(fact: str, subject: str) -> list[str]:
    """The fact's words after the person's name, where it opens with it."""
    if not subject or not fact.lower().startswith(subject.lower()):
        return []
    return words(fact[len(subject) :])


def first_person_verb(fact: str, subject: str, said: str, language: str) -> str | None:
    """The speaker's first-person verb the fact keeps after the person's name, or None."""
    rest = _after_name(fact, subject)
    skip = _BEFORE_VERB.get(language, frozenset())
    while rest and rest[0].lower() in skip:
        rest = rest[1:]
    if not rest:
        return None
    verb = rest[0]
    word = verb.lower()
    if verb[:1].isupper() or word not in {w.lower() for w in words(said)}:
        return None
    if language == "es":
        regular = len(word) > 2 and word.endswith("o") and word not in _ES_NOT_VERBS
        return verb if regular or word in _ES_FIRST_IRREGULAR else None
    if language == "de":
        present = len(word) > 2 and word.endswith("e") and not word.endswith("te")
        return verb if present and word not in _DE_BOTH_PERSONS else None
    return None


def wish_as_done(fact: str, subject: str, said: str, language: str) -> str | None:
    """The word of wish every source clause of the fact holds where the fact holds
    none ("gustaría"); else None."""
    wish = _WISH.get(language)
    if wish is None or wish.search(fact):
        return None
    found = [wish.search(c.text) for c in sources(fact, subject, said, language)]
    if not found or not all(found):
        return None
    first = found[0]
    return first.group() if first else None


def said_of_relative(fact: str, subject: str, said: str, language: str) -> str | None:
    """The speaker's someone ("hermana") every source clause of the fact opens with,
    where the fact names neither them nor the name after them; else None."""
    mine, people = _MINE.get(language), _PEOPLE.get(language)
    if mine is None or people is None or not _after_name(fact, subject):
        return None
    named = {w.lower() for w in words(fact)}
    whose: list[str] = []
    for clause in sources(fact, subject, said, language):
        tokens = words(clause.text)
        while tokens and tokens[0].lower() in _JOINING:
            tokens = tokens[1:]
        if len(tokens) < 3 or tokens[0].lower() not in mine or tokens[1].lower() not in people:
            return None
        # "Mi hermana Lucía": the name after the someone counts as naming them
        called = [t.lower() for t in tokens[2:4] if t[:1].isupper()]
        if tokens[1].lower() in named or any(c in named for c in called):
            return None
        whose.append(tokens[1])
    return whose[0] if whose else None


def first_person(given: FactInput) -> Outcome | None:
    """`FIRST_PERSON`: a first-person word of the speaker, or (Spanish, German) their
    first-person verb, left in the fact."""
    found = grounding.first_person(given)
    if found is not None:
        return found
    verb = first_person_verb(given.fact, given.subject, given.said, given.language)
    if verb is None:
        return None
    return Outcome("FIRST_PERSON", f"the speaker's first-person verb ({verb}), not of the person")


def plan_as_done(given: FactInput) -> Outcome | None:
    """`PLAN_AS_DONE`: English by its clauses' grammar, Spanish, German and French by
    their words of wish."""
    if given.language == "en":
        return whose.plan(given)
    word = wish_as_done(given.fact, given.subject, given.said, given.language)
    return Outcome("PLAN_AS_DONE", f"a wish ({word}) written as done") if word else None


def attributed_to_other(given: FactInput) -> Outcome | None:
    """`ATTRIBUTED_TO_OTHER`: English by its clauses' grammar (`deltamem.rules.whose`),
    Spanish, German and French by the speaker's someone a clause opens with."""
    if given.language == "en":
        return whose.attributed_to_other(given)
    who = said_of_relative(given.fact, given.subject, given.said, given.language)
    return Outcome("ATTRIBUTED_TO_OTHER", f"said of the speaker's {who}") if who else None
