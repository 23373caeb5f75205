"""English fact rules: whose fact it is, whether it is done, and what the person was
called. They read English clauses (`deltamem.rules.attribution`), so they run on
English turns only."""

from __future__ import annotations

import re

from deltamem.porter import stem
from deltamem.rules.attribution import (
    dislike_from_request,
    others_thing,
    plan_as_done,
    said_of_another,
    source_clauses,
    spouse_not_named,
)
from deltamem.rules.base import Outcome
from deltamem.rules.grounding import FREE_STEMS, forms, person_stems
from deltamem.rules.pipeline import FactInput
from deltamem.text import terms

# "<person> is a/an <label>", the label ending where a clause about them begins
_LABEL = re.compile(
    r"^(?P<subject>.+?)\s+(?:is|was)\s+an?\s+(?P<label>.+?)"
    r"(?:(?:,\s*|\s+)(?:who|that)\s+(?P<clause>.+?)|,?\s+and\s+(?P<verb>\w*[^s\W]s)(?P<rest>\s.*?)"
    r"|,.*|\s+and\s+.*)?\.?$"
)
# label words that call the person nothing in particular
_PLAIN_LABEL = frozenset(stem(w) for w in "person individual someone".split())
# a label's head that names only how the person stands to the thing before or after it
# ("dog lover", "pet owner", "lover of nature", "taekwondo practitioner", "health
# seminar attendee", "chronic fatigue syndrome patient"): where the turn said that
# thing, the label says no more than the turn ("enthusiast" is not among them: the
# 1.5B model makes one of any liking, or of a concert she disliked)
_RELATION_HEAD = frozenset(
    stem(w)
    for w in "lover owner fan practitioner user player keeper attendee patient participant".split()
)


def unsaid_label(fact: str, subject: str, heard: set[str]) -> tuple[str | None, str | None]:
    """A fact that calls the person something ("is a fashion designer", "is a music
    enthusiast") with a word neither they nor the assistant used in the turn is the
    model's summary, and often wrong: the 1.5B model turns "my online clothes store"
    into "a fashion designer" and a liking into "an enthusiast". Such a label is
    dropped: the clause about the person that follows it stays ("is a music enthusiast
    who enjoys jazz" -> "enjoys jazz"); a label alone is refused. A label whose only
    unsaid word is a head that relates the person to a thing said ("pet lover" where
    the turn spoke of pets) says no more than the turn and is kept. `heard`: stems of
    the turn and the assistant's message before it. Returns (fact, None) to keep,
    possibly rewritten, or (None, why) to refuse."""
    m = _LABEL.match(fact)
    if m is None or m.group("subject").lower() != subject.lower():
        return fact, None
    free = heard | _PLAIN_LABEL | person_stems(subject) | FREE_STEMS
    label = terms(m.group("label"), limit=64)
    unheard = [t for t in label if not forms(t) & free]
    said = [t for t in label if forms(t) & (heard - _PLAIN_LABEL)]
    if not unheard or (said and all(forms(t) & _RELATION_HEAD for t in unheard)):
        return fact, None
    clause = m.group("clause") or (m.group("verb") and m.group("verb") + m.group("rest"))
    if clause:
        return f"{m.group('subject')} {clause.rstrip('.')}", None
    return None, "calls the person something they did not say"


def label(given: FactInput) -> Outcome | None:
    kept, why = unsaid_label(given.fact, given.subject, given.heard)
    if kept is None:
        return Outcome("UNSAID_LABEL", why or "calls the person something they did not say")
    if kept != given.fact:
        return Outcome("UNSAID_LABEL", "a label the turn did not say, dropped", kept)
    return None


# what introduces the speaker by name: "I'm Sharon", "my name is Sharon"
_INTRODUCING = re.compile(
    r"(?:\bI['’]m|\bI\s+am|\bname\s+is|\bname['’]s|\bcall\s+me|\bthis\s+is|\bit['’]s)\s+$",
    re.IGNORECASE,
)


def namesake(given: FactInput) -> Outcome | None:
    """A fact made from a clause about someone who shares the person's first name
    ("Sharon always encourages me", from her friend Sharon Jackson, stored as
    "Sharon Brown always encourages ..."). People do not speak of themselves by
    their first name, so where their own message names it, outside an introduction
    ("I'm Sharon", "Sharon here"), it names another."""
    first = given.subject.split()[0] if given.subject else ""
    if given.subject == "The user" or not first[:1].isupper():
        return None
    if not given.fact.lower().startswith(given.subject.lower()):
        return None
    said = given.said
    name = re.compile(rf"\b{re.escape(first)}\b(?!['’]s?\s+here)(?!\s+here\b)")
    other = [m for m in name.finditer(said) if not _INTRODUCING.search(said[: m.start()])]
    if not other:
        return None
    rest = given.fact[len(given.subject) :]
    if any(name.search(c) for c, _ in source_clauses(rest, said)):
        return Outcome("NAMESAKE", f"said of another {first}, not the person")
    return None


def attributed_to_other(given: FactInput) -> Outcome | None:
    why = said_of_another(given.fact, given.subject, given.said)
    if why is None or not why.startswith("said of"):
        return None
    return Outcome("ATTRIBUTED_TO_OTHER", why)


def others_thing_rule(given: FactInput) -> Outcome | None:
    why = others_thing(given.fact, given.subject, given.said)
    return Outcome("OTHERS_THING", why) if why else None


def plan(given: FactInput) -> Outcome | None:
    why = plan_as_done(given.fact, given.subject, given.said)
    return Outcome("PLAN_AS_DONE", why) if why else None


def dislike(given: FactInput) -> Outcome | None:
    why = dislike_from_request(given.fact, given.subject, given.said)
    return Outcome("DISLIKE_FROM_REQUEST", why) if why else None


def spouse(given: FactInput) -> Outcome | None:
    why = spouse_not_named(given.fact, given.said)
    return Outcome("SPOUSE_NOT_NAMED", why) if why else None
