"""Small deterministic text helpers: tokens, stopwords, keywords, normal forms."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import pysbd  # type: ignore[import-untyped]

from deltamem.porter import stem

STOPWORDS = frozenset(
    (
        "a about above after again against all also am an and any are as at be because been "
        "before being below between both but by can could did do does doing down during each "
        "few for from further had has have having he her here hers herself him himself his "
        "how i if in into is it its itself just me more most my myself no nor not now of off "
        "on once only or other our ours ourselves out over own same she should so some such "
        "than that the their theirs them themselves then there these they this those through "
        "to too under until up very was we were what when where which while who whom why will "
        "with would you your yours yourself yourselves user users s t don doesn didn isn wasn "
        "weren won let lets like really get got much many one two also still ever "
    ).split()
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
NEGATION = re.compile(r"\b(?:not|no|never|neither|nor)\b|n['’]t\b", re.IGNORECASE)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def negated(text: str) -> bool:
    """Whether the text holds a negation ("not", "never", "doesn't" …)."""
    return bool(NEGATION.search(text))


def plain_numbers(text: str) -> str:
    """The text with numbers written without thousands commas ("15,700" → "15700")."""
    return _THOUSANDS.sub("", text)


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _term(word: str) -> str:
    """A word's search form: lowercase, straight apostrophe, no possessive 's."""
    lw = word.lower().replace("’", "'")
    return lw[:-2] if lw.endswith("'s") else lw


def terms(text: str, limit: int = 24) -> list[str]:
    """Distinct lowercase content words, in order of first appearance."""
    seen: dict[str, None] = {}
    for w in words(text):
        lw = _term(w)
        if len(lw) < 2 or lw in STOPWORDS or lw in seen:
            continue
        seen[lw] = None
        if len(seen) >= limit:
            break
    return list(seen)


def stems_of(text: str) -> set[str]:
    """The stemmed content words of a whole text."""
    return {stem(t) for t in terms(text, limit=100_000)}


def keywords(text: str, limit: int = 5, skip: frozenset[str] = frozenset()) -> list[str]:
    """A few distinctive words of a fact: numbers and proper nouns first, then long words.

    `skip` drops words that say nothing about this fact in particular (the
    person's own name, which every memory of theirs repeats).
    """
    scored: list[tuple[int, int, str]] = []
    for pos, w in enumerate(terms(text, limit=64)):
        if w in skip:
            continue
        original = next((x for x in words(text) if _term(x) == w), w)
        score = 2 if (original[:1].isupper() or any(c.isdigit() for c in w)) else 0
        score += 1 if len(w) >= 6 else 0
        scored.append((-score, pos, w))
    return [w for _, _, w in sorted(scored)[:limit]]


def normalise(text: str) -> str:
    """Case-, space- and punctuation-insensitive form, for exact-restatement checks."""
    return " ".join(w.lower().replace("’", "'") for w in words(text))


def clip(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped. A full stop after "St", "Dr", "Mr", an
    initial or "U.S." ends no sentence ("a nurse at St. Michael's Hospital"): pysbd's
    rules know them, where a split at every ". " cut a fact in two."""
    text = text.strip()
    if not text:
        return []
    return [s.strip() for s in _segmenter().segment(text) if s.strip()]


def shorten(text: str, max_words: int) -> str:
    """The first sentences of `text` within `max_words` words (at least the first
    `max_words` words), marked with an ellipsis when something was cut."""
    ws = text.split()
    if len(ws) <= max_words:
        return text.strip()
    text = text.strip()
    end, count = 0, 0
    for s in sentences(text):
        n = len(s.split())
        if count + n > max_words:
            break
        at = text.find(s, end)  # cut the text itself, so its spacing stays
        if at < 0:
            break
        end, count = at + len(s), count + n
    if not end:
        return " ".join(ws[:max_words]) + " …"
    return text[:end] + " …"


# the one or two capitalised words a fact opens with ("Tim", "Sarah Garcia's major is ...")
_OPENING_NAME = re.compile(r"^([A-Z][\w-]+(?: [A-Z][\w-]+)?)(?:['’]s)?\b")


def _opening_names(facts: list[str]) -> Counter[str]:
    """How many facts open with each name ("The user" is none)."""
    return Counter(
        m.group(1) for f in facts if (m := _OPENING_NAME.match(f)) and not f.startswith("The ")
    )


def people_named_first(facts: list[str]) -> set[str]:
    """The lowercased words of every name at least two facts open with ("Tim" and
    "John" in a chat between the two): the people the facts are about, which are no
    value of any one of them."""
    counts = _opening_names(facts)
    return {w.lower() for name, n in counts.items() if n >= 2 for w in name.split()}


def leading_name(facts: list[str]) -> str | None:
    """The two-word name most facts open with ("Sarah Garcia's major is ..."), if at
    least two do."""
    counts = Counter({name: n for name, n in _opening_names(facts).items() if " " in name})
    if not counts:
        return None
    name, n = counts.most_common(1)[0]
    return name if n >= 2 else None
