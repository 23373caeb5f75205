"""Relative time expressions resolved in code, against the session date, before the
model reads a turn: "we got engaged yesterday" reaches it as "we got engaged
yesterday [1 November 2026]". A 1.5B model asked to do this arithmetic itself
wrote wrong dates, or kept "last week" in a fact that is read months later.

dateparser finds and resolves the expressions; only those with a relative cue are
annotated, since its search also takes words like "second" or "may" for dates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|this|coming|past|in \d+|in (?:a|an|one|"
    r"two|three|four|five|six|seven|eight|nine|ten) )\b",
    re.IGNORECASE,
)
_UNIT = re.compile(
    r"\b(day|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|yesterday|today|tonight|tomorrow)s?\b",
    re.IGNORECASE,
)


def _format(phrase: str, when: datetime) -> str:
    p = phrase.lower()
    if "year" in p:
        return f"{when:%Y}"
    if "month" in p:
        return f"{when:%B %Y}"
    if "week" in p and "weekend" not in p:
        return f"week of {when.day} {when:%B %Y}"
    return f"{when.day} {when:%B %Y}"


# dateparser's search misses an expression beside another one ("moved last week, and
# got engaged yesterday" finds only "yesterday"): each clause is searched alone
_CLAUSES = re.compile(r"[.,;:!?]+|\band\b|\bbut\b")


def relative_dates(text: str, at: datetime) -> list[tuple[str, str]]:
    """(the expression as written, its date) for each relative time expression of
    `text`, in order, resolved against `at`."""
    if not _RELATIVE.search(text):
        return []  # the common case, without dateparser's cost
    from dateparser.search import search_dates  # ~1 s import: only when needed

    base = at.replace(tzinfo=None)
    out: list[tuple[str, str]] = []
    for clause in _CLAUSES.split(text):
        if not _RELATIVE.search(clause):
            continue
        try:
            found = search_dates(
                clause,
                languages=["en"],
                settings={"RELATIVE_BASE": base, "RETURN_AS_TIMEZONE_AWARE": False},
            )
        except Exception:  # dateparser raises on odd input; the clause is read as is
            continue
        for phrase, when in found or []:
            relative = _RELATIVE.search(phrase) and _UNIT.search(phrase)
            if relative or "ago" in phrase.lower():
                out.append((phrase, _format(phrase, when)))
    return out


def annotate(text: str, at: datetime | Sequence[tuple[str, str]]) -> str:
    """`text` with each relative time expression followed by its date in brackets
    (`at`: the time they are relative to, or what `relative_dates` found)."""
    found = relative_dates(text, at) if isinstance(at, datetime) else at
    out, start = [], 0
    for phrase, when in found:
        pos = text.find(phrase, start)
        if pos < 0:
            continue
        end = pos + len(phrase)
        out.append(text[start:end] + f" [{when}]")
        start = end
    return "".join(out) + text[start:]


# a preposition before the expression that its date keeps ("since", "until")
_OWN_PREPOSITION = re.compile(r"\b(?:since|until|till|from|by|before|after|to)\s+$", re.I)


def dated(fact: str, found: Sequence[tuple[str, str]]) -> str:
    """The fact with each relative expression of its source turn that it repeats
    ("moved last week") written as the date found for it ("moved in the week of
    11 June 2029"): the model often copies the words and leaves the date out, and
    a fact is read months after "last week" meant anything."""
    for phrase, when in found:
        m = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)(?:\s*\[[^\]]*\])?", fact, re.I)
        if m is None:
            continue
        if when.startswith("week of"):
            said = f"in the {when}"
        elif when[0].isdigit() and not when.isdigit():
            said = f"on {when}"
        else:
            said = f"in {when}"
        if _OWN_PREPOSITION.search(fact[: m.start()]):
            # "since last year" -> "since 2029", not "since in 2029"
            said = said.split(" ", 1)[1]
        fact = fact[: m.start()] + said + fact[m.end() :]
    return fact
