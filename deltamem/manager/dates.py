"""Relative time expressions resolved in code, against the session date, before the
model reads a turn: "we got engaged yesterday" reaches it as "we got engaged
yesterday [1 November 2026]". A 1.5B model asked to do this arithmetic itself
wrote wrong dates, or kept "last week" in a fact that is read months later.

dateparser finds and resolves the expressions; only those with a relative cue are
annotated, since its search also takes words like "second" or "may" for dates.
"""

from __future__ import annotations

import re
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


def annotate(text: str, at: datetime) -> str:
    """`text` with each relative time expression followed by its date in brackets."""
    if not _RELATIVE.search(text):
        return text  # the common case, without dateparser's cost
    from dateparser.search import search_dates  # ~1 s import: only when needed

    base = at.replace(tzinfo=None)
    try:
        found = search_dates(
            text,
            languages=["en"],
            settings={"RELATIVE_BASE": base, "RETURN_AS_TIMEZONE_AWARE": False},
        )
    except Exception:  # dateparser raises on odd input; the turn is then read as is
        return text
    out, start = [], 0
    for phrase, when in found or []:
        if not ((_RELATIVE.search(phrase) and _UNIT.search(phrase)) or "ago" in phrase.lower()):
            continue
        pos = text.find(phrase, start)
        if pos < 0:
            continue
        end = pos + len(phrase)
        out.append(text[start:end] + f" [{_format(phrase, when)}]")
        start = end
    return "".join(out) + text[start:]
