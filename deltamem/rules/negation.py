"""A negation the fact dropped: "even if I'm not into games" -> "Joanna is a gamer".

The 1.5B extractor keeps a clause's words and loses its "not". Grounding passes
such a fact (every word was said), so this check reads the clause the fact was made
from: where every clause that holds the fact's words denies them (a negation before
the first of them) and the fact denies nothing, the fact says the opposite of what
was said. It reads negation words, not grammar, so it runs in the languages whose
negations it knows.
"""

from __future__ import annotations

import re

from deltamem.rules.base import Outcome
from deltamem.rules.pipeline import FactInput
from deltamem.rules.sources import fact_words, first_at, sources

# the words that deny what follows them, by language
NEGATIONS = {
    # (not "nothing", "nobody", "none": "there's nothing like a stadium's energy" says
    # the energy is the best)
    "en": r"\b(?:not|no|never|neither|nor)\b|n['’]t\b",
    "es": r"\b(?:no|nunca|jamás|ni|nada|nadie|tampoco)\b",
    "de": r"\b(?:nicht|nie|niemals|kein|keine|keinen|keinem|keiner|keines|nichts|weder)\b",
    "fr": r"\b(?:ne|pas|jamais|rien|personne|ni)\b|\bn['’]",
}
_NEGATION = {lang: re.compile(p, re.IGNORECASE) for lang, p in NEGATIONS.items()}
# a fact that says a denial in its own words ("dislikes sodas", "quit smoking",
# "avoids dairy", "is dairy-free") keeps what the message denied
_DENYING = {
    "en": re.compile(
        r"\b(?:dislike[sd]?|hates?|hated|avoids?|avoided|quit|stopped|stops|refuses?|refused|"
        r"lacks?|without|against|gave\s+up|given\s+up|no\s+longer|anymore|\w+-free)\b",
        re.IGNORECASE,
    ),
}
# a negation that says yes: "can't wait to see it", "couldn't agree more", "never
# miss a game", "no doubt", "can't stop thinking about it", "didn't expect to love it"
# (English only; other
# languages' idioms are not known here, and a fact there is only refused when its
# every clause denies it)
_AFFIRMING = re.compile(
    r"\b(?:can['’]?t|cannot|couldn['’]t|can\s+not)\s+(?:wait|stop|help|get\s+enough|"
    r"agree\s+more|believe|imagine|thank|recommend\b.*\benough)\b"
    r"|\bnever\s+(?:miss|fails?|gets?\s+old|stops?)\b"
    r"|\bno\s+(?:doubt|wonder|problem|worries|way)\b"
    r"|\bnot\s+(?:only|just|bad)\b"
    r"|\bwho\s+(?:can|could)\s+say\s+no\b"
    # a denied thought, not a denied fact: "I never thought I'd love pottery"
    r"|(?:n['’]t|\bnot|\bnever)\s+(?:\w+\s+)?(?:expect(?:ed)?|think|thought|imagined?|realized?|"
    r"knew|know)\b",
    re.IGNORECASE,
)


def negation_dropped(given: FactInput) -> Outcome | None:
    negation = _NEGATION.get(given.language)
    if negation is None or negation.search(given.fact):
        return None
    denying = _DENYING.get(given.language)
    if denying is not None and denying.search(given.fact):
        return None
    found = sources(given.fact, given.subject, given.said, given.language)
    if not found:
        return None
    words = fact_words(given.fact, given.subject, given.language)
    for clause in found:
        at = first_at(clause.text, words)
        m = negation.search(clause.text)
        if m is None or at is None or m.start() > at or _AFFIRMING.search(clause.text):
            return None
    return Outcome("NEGATION_DROPPED", f"the message denies it: {found[0].text[:80]!r}")
