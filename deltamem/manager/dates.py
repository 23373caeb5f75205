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
from datetime import date, datetime, timedelta

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


def day_in_words(when: date) -> str:
    """'7 May 2023'."""
    return f"{when.day} {when:%B %Y}"


def _format(phrase: str, when: datetime) -> str:
    p = phrase.lower()
    if "year" in p:
        return f"{when:%Y}"
    if "month" in p:
        return f"{when:%B %Y}"
    if "week" in p and "weekend" not in p:
        return f"week of {day_in_words(when)}"
    return day_in_words(when)


# dateparser's search misses an expression beside another one ("moved last week, and
# got engaged yesterday" finds only "yesterday"): each clause is searched alone
_CLAUSES = re.compile(r"[.,;:!?]+|\band\b|\bbut\b")


# what dateparser does not resolve: weekends ("last weekend", "two weekends ago") and
# seasons ("next spring"); northern seasons by month, winter named by its December
_WEEKEND = re.compile(
    r"\b(?:(?P<which>last|this|next|past|coming)\s+weekend"
    r"|(?P<n>two|three|four|\d+)\s+weekends\s+ago)\b",
    re.IGNORECASE,
)
_SEASON = re.compile(
    r"\b(?P<which>last|this|next|past|coming)\s+(?P<season>spring|summer|fall|autumn|winter)\b",
    re.IGNORECASE,
)
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_COUNT = {"two": 2, "three": 3, "four": 4}


def _weekend(m: re.Match[str], at: date) -> str:
    """The weekend meant, named by its Saturday: "last weekend" on a Wednesday is
    the one three days before; "next weekend" from Monday to Thursday the coming one,
    from Friday on the one after."""
    coming = at + timedelta(days=5 - at.weekday())  # this week's Saturday
    which = (m.group("which") or "").lower()
    if m.group("n"):
        n = m.group("n").lower()
        saturday = coming - timedelta(weeks=_COUNT.get(n) or int(n))
    elif which in ("last", "past"):
        saturday = coming - timedelta(weeks=1)
    elif which == "next" and at.weekday() >= 4:
        saturday = coming + timedelta(weeks=1)
    else:
        saturday = coming
    return f"weekend of {day_in_words(saturday)}"


def _season(m: re.Match[str], at: date) -> str:
    """The season meant, by its year: "last summer" in September is the one just
    ended, in July the year before's; "next spring" the first one to start after."""
    season = m.group("season").lower()
    which = m.group("which").lower()
    first = _SEASON_START[season]
    # this year's occurrence: winter is named by its December, so January's is last year's
    year = at.year - 1 if season == "winter" and at.month < 3 else at.year
    start = date(year, first, 1)
    end = date(year + 1, 3, 1) if season == "winter" else date(year, first + 3, 1)
    if which in ("last", "past") and end > at:
        year -= 1
    elif which in ("next", "coming") and start <= at:
        year += 1
    return f"{'autumn' if season == 'fall' else season} {year}"


def _dateparser_misses(clause: str, at: datetime) -> list[tuple[int, str, str]]:
    day = at.date()
    found = [(m.start(), m.group(), _weekend(m, day)) for m in _WEEKEND.finditer(clause)]
    found += [(m.start(), m.group(), _season(m, day)) for m in _SEASON.finditer(clause)]
    return found


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
        except Exception:  # dateparser raises on odd input: only the rules below read it
            found = []
        here = [
            (clause.find(phrase), phrase, _format(phrase, when))
            for phrase, when in found or []
            if (_RELATIVE.search(phrase) and _UNIT.search(phrase)) or "ago" in phrase.lower()
        ]
        missed = _dateparser_misses(clause, base)
        # dateparser may take "last weekend" for a day of its own: the rule wins
        here = [h for h in here if not any(a <= h[0] < a + len(p) for a, p, _ in missed)]
        out.extend((phrase, when) for _, phrase, when in sorted(here + missed))
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


def dated(fact: str, at: datetime | Sequence[tuple[str, str]]) -> str:
    """The fact with each relative expression of its source turn that it repeats
    ("moved last week") written as the date found for it ("moved in the week of
    11 June 2029"): the model often copies the words and leaves the date out, and
    a fact is read months after "last week" meant anything. `at`: what
    `relative_dates` found in the turn, or the time to find the fact's own relative
    to (a raw turn read as it is)."""
    found = relative_dates(fact, at) if isinstance(at, datetime) else at
    for phrase, when in found:
        m = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)(?:\s*\[[^\]]*\])?", fact, re.I)
        if m is None:
            continue
        if when.startswith("week of"):
            said = f"in the {when}"
        elif when.startswith("weekend of"):
            said = f"on the {when}"
        elif when[0].isdigit() and not when.isdigit():
            said = f"on {when}"
        else:
            said = f"in {when}"
        if _OWN_PREPOSITION.search(fact[: m.start()]):
            # "since last year" -> "since 2029", not "since in 2029"
            said = said.split(" ", 1)[1]
        fact = fact[: m.start()] + said + fact[m.end() :]
    return fact
