"""Yes/no questions: telling them apart, and an answer's "No" that says the question
again.

A small answerer opens with "Yes" to a question whose premise its items contradict
("Did she express a liking for romantic comedies?" with her dislike in the list).
The answerer (`answer.py`) then asks again for a "No". After a "No", asked for it or
not, the model often says the question back ("No, she expressed a liking for ..."),
which contradicts the "No"; `without_restated_premise` takes such a sentence out.
"""

from __future__ import annotations

import re

from deltamem.porter import stem
from deltamem.text import NEGATION, terms

# "Did …", "Would …": a question a yes or a no answers ("… A or B?" is a choice)
YES_NO_QUESTION = re.compile(
    r"^\s*(?:did|does|do|is|was|were|are|has|have|had|can|could|will|would|should)\b",
    re.IGNORECASE,
)
_CHOICE = re.compile(r"\bor\b", re.IGNORECASE)
# a text's opening yes or no, hedged or not (LoCoMo's references: "Likely no; since
# this one went badly"), with what separates it from the rest
_OPENING = re.compile(
    r"^\W*(?:(?:most\s+)?(?:likely|probably)[\s,;:]+)?(yes|no)\b[\s,.;:!-]*", re.IGNORECASE
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
# dates in a question: a restatement may leave them out
_MONTHS = frozenset(
    stem(m)
    for m in "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec".split()
)


def sentences(text: str) -> list[str]:
    """The text's sentences, split where one ends and a capital starts the next."""
    return [s for s in _SENTENCE.split(text) if s.strip()]


def is_yes_no(question: str) -> bool:
    """A question a yes or a no answers (not "Would she prefer A or B?")."""
    return bool(YES_NO_QUESTION.match(question)) and not _CHOICE.search(question)


def opening(answer: str) -> str | None:
    """ "yes" or "no" where the answer opens with one, else None."""
    m = _OPENING.match(answer)
    return m.group(1).lower() if m else None


def after_opening(text: str) -> str:
    """The text less its opening yes or no ("No, she did not." → "she did not.")."""
    return _OPENING.sub("", text, count=1)


def _stems(text: str) -> list[str]:
    return [stem(t) for t in terms(text, limit=100_000)]


def _in_order(needle: list[str], hay: list[str]) -> int:
    """How many of `needle`'s words `hay` holds in the same order (longest common
    subsequence)."""
    row = [0] * (len(hay) + 1)
    for a in needle:
        prev = 0
        for j, b in enumerate(hay, 1):
            prev, row[j] = row[j], prev + 1 if a == b else max(row[j], row[j - 1])
    return row[-1]


def restates(question: str, sentence: str) -> bool:
    """The sentence says what the question asks, as a statement: every content word
    of it but its date, in its order, negated as often ("she expressed a liking for
    romantic comedies" for "Did she express a liking for romantic comedies on Sep 06,
    2025?"). A correction differs in a word ("remained positive" for "remain
    negative") or in their order ("authentic dishes over spicy ones" for "spicy
    dishes over authentic ones")."""
    asked = [s for s in _stems(question) if not s.isdigit() and s not in _MONTHS]
    if not asked:
        return False
    if len(NEGATION.findall(sentence)) != len(NEGATION.findall(question)):
        return False
    return _in_order(asked, _stems(sentence)) == len(asked)


def without_restated_premise(question: str, reply: str) -> str:
    """A "No" answer to a yes/no question: "No." and what follows it, less the
    sentences that say the question again (they contradict the "No"); a reply that
    opens with "Yes" keeps nothing but the "No"."""
    said = opening(reply)
    rest = after_opening(reply).strip()
    if said == "yes" or not rest:
        return "No."
    parts = sentences(rest)
    kept = [s for s in parts if not restates(question, s)]
    if not kept:
        return "No."
    if len(kept) == len(parts) and said == "no":
        return reply.strip()
    return "No. " + " ".join(kept)
