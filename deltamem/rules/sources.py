"""The clauses of a message a fact was made from.

A message is cut into sentences (each knows whether it asks) and those into clauses:
at commas and dashes in any language, and at the words that join clauses in English.
A fact's sources are the clauses that hold the most of its content words (a word
made from a verb counting for the verb: "gamer" for "games"). The checks that read
what a clause does to those words (denies them, says them of the listener, asks
them) read these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deltamem.porter import stem
from deltamem.rules.grounding import (
    FREE_STEMS,
    clipped,
    clippings,
    forms,
    function_words,
    person_stems,
)
from deltamem.text import terms

_SENTENCE = re.compile(r"[^.;:!?()\[\]\"“”¿¡]+[.;:!?()\[\]\"“”¿¡]*")
# a comma, or a dash with a space after it, whatever is before it ("my family- they
# help"): cuts in any language
PUNCTUATION_CUT = r",\s*|\s*[-–—]\s+|\s+[–—]\s*"
_JOINS = {
    "en": re.compile(
        rf"{PUNCTUATION_CUT}|\s+(?:and|but|because|so|while|whereas|although|though|since|"
        r"when|which|who|if)\s+",
        re.IGNORECASE,
    ),
}
_PUNCTUATION = re.compile(PUNCTUATION_CUT)


@dataclass(frozen=True)
class Clause:
    text: str
    asks: bool  # it ends a sentence that ends with a question mark
    # it opens its sentence (what comes before it in the sentence is a word or two:
    # "Yeah, keep going", "Read lots and try ...")
    opens: bool = True


def clauses(said: str, language: str) -> list[Clause]:
    cut = _JOINS.get(language, _PUNCTUATION)
    out: list[Clause] = []
    for m in _SENTENCE.finditer(said):
        sentence = m.group()
        parts = [c.strip() for c in cut.split(sentence.rstrip('.;:!?()[]"“”¿¡')) if c.strip()]
        for i, text in enumerate(parts):
            asks = "?" in sentence and i == len(parts) - 1
            opens = all(len(p.split()) <= 2 for p in parts[:i])
            out.append(Clause(text, asks, opens))
    return out


def fact_words(fact: str, subject: str, language: str) -> list[tuple[str, set[str]]]:
    """The fact's content words, each with its `forms`, less the person's name and
    the words a fact may add freely."""
    skip = person_stems(subject) | FREE_STEMS | function_words(language)
    return [(t, f) for t in terms(fact, limit=64) if not (f := forms(t)) & skip]


def sources(fact: str, subject: str, said: str, language: str) -> list[Clause]:
    """The clauses holding the most of the fact's content words (a clipped word,
    "comps", holding the word it begins, "competitions"); none when no clause holds
    one."""
    words = fact_words(fact, subject, language)
    if not words:
        return []
    held: list[tuple[int, Clause]] = []
    for clause in clauses(said, language):
        stems = {stem(t) for t in terms(clause.text, limit=64)}
        clipped_words = clippings(clause.text, language)
        n = sum(bool(f & stems) or clipped(t, clipped_words) for t, f in words)
        if n:
            held.append((n, clause))
    if not held:
        return []
    best = max(n for n, _ in held)
    return [c for n, c in held if n == best]
