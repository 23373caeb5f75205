"""Splitting a packed memory into atomic facts.

Small models often write several facts as one item ("Sarah is 39. She lives in
Miami. She has a PhD."). Each sentence becomes its own memory, and a sentence that
opens with a pronoun gets the subject of the first sentence back, so every
memory still names the person and stands on its own.

They also quote the user inside an item ("Sarah's routine is a game-changer. I
feel more balanced."): a first-person sentence after a third-person one is the
user's words, not a fact that stands on its own (`first_person`).
"""

from __future__ import annotations

import re

from deltamem.manager.voice import in_third_person, opens_with_verb
from deltamem.text import sentences

_PRONOUN = re.compile(r"^(She|He)\s+(?=\w)")
_POSSESSIVE = re.compile(r"^(Her|His)\s+(?=\w)")
_NAME = re.compile(r"^(The user|[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){0,2})\b")
_FIRST_PERSON = re.compile(r"^(?:I|I'm|I've|I'd|I'll|Me|My|We|We're|We've|Our)\b")
MIN_WORDS = 4  # shorter pieces are fragments, not facts
# capitalised openers that are not a person ("In March 2029 Tom moved ..."): no subject
_NOT_NAMES = frozenset(
    "A An The In On At After Before Since During When While Last Next This That These "
    "Those It They We I My Our Their Its Her His She He Yesterday Today Tomorrow Then "
    "Also And But Now Recently Every Each Both For From With As By If".split()
)


def split_facts(content: str) -> list[str]:
    parts = sentences(content)
    if len(parts) < 2:
        return [content.strip()]
    m = _NAME.match(parts[0])
    subject = m.group(1) if m else None
    if subject is not None and (
        (subject.split()[0] in _NOT_NAMES and subject != "The user")
        or subject.endswith(("'s", "’s"))  # "Tom's sister ... She": whose "she" is unsure
    ):
        subject = None
    facts: list[str] = []
    for s in parts:
        if subject is not None:
            s = _PRONOUN.sub(subject + " ", s)
            s = _POSSESSIVE.sub(subject + "'s ", s)
            if opens_with_verb(s):  # "… ran the marathon! Finished in 3 hours 52 minutes."
                s = f"{subject} {s[0].lower()}{s[1:]}"
        if len(s.split()) < MIN_WORDS and facts:
            facts[-1] = f"{facts[-1]} {s}"  # a fragment stays with the sentence before it
        else:
            facts.append(s)
    return facts


_THEY = re.compile(r"^They\s+(?=\w)")
_THEIR = re.compile(r"^(?:Their|My)\s+(?=\w)")
_IS_HER = re.compile(r"\b(is|was|are|were)\s+(?:her|his)\s+(?=\w)")
_SHE = re.compile(r"\b(?:she|he)\b")
_NAMED = re.compile(r"\b[A-Z][a-z]+")  # a capitalised word: someone else may be named
_I_AM = re.compile(r"^(?:I am|I'm)\s+(?=\w)")


def name_subject(sentence: str, subject: str) -> str:
    """A sentence about the person that opens with a pronoun ("She", "Her", "They",
    "Their", and the user's own "My ..." or "I am ...") or with no subject at all
    (in lower case) gets `subject` back, so it names the person and stands on its
    own; the person's own "I work ..." is told of them (`in_third_person`)."""
    s = sentence.strip().replace("’", "'")
    if s[:1].islower() and subject.lower() not in s.lower():
        # a fact cut from its subject opens in lower case, in any language ("trabaja
        # en el Hospital La Paz", "loves the beaches there"): it is the person's
        s = f"{subject} {s}"
    s = _PRONOUN.sub(subject + " ", s)
    s = _POSSESSIVE.sub(subject + "'s ", s)
    s = _THEIR.sub(subject + "'s ", s)
    s = _I_AM.sub(subject + " is ", s)
    if subject.lower() not in s.lower():
        # "JacksonLinda is her friend" / "With ..., she has saved $139,000": the
        # pronoun is the person where nobody else is named before it
        s = _IS_HER.sub(lambda m: f"{m.group(1)} {subject}'s ", s, count=1)
        she = _SHE.search(s)
        others = [w for w in _NAMED.findall(s[: she.start()] if she else "") if w not in _NOT_NAMES]
        if subject not in s and she and not others:
            s = s[: she.start()] + subject + s[she.end() :]
    if _THEY.match(s):  # "They have" -> "Sarah has": only the common verbs agree simply
        rest = _THEY.sub("", s)
        verb, _, tail = rest.partition(" ")
        third = {"have": "has", "are": "is", "were": "was", "do": "does"}.get(verb)
        if third or verb.endswith("ed"):
            s = f"{subject} {third or verb} {tail}".strip()
    return in_third_person(s, subject) or s


def first_person(sentence: str) -> bool:
    """A sentence in the speaker's own voice ("I feel…", "My team…")."""
    return bool(_FIRST_PERSON.match(sentence.strip().replace("’", "'")))


def drop_quotes(facts: list[str]) -> tuple[list[str], list[str]]:
    """(facts, quoted sentences): first-person sentences are set apart unless they
    are all there is (then the item has nothing else to keep)."""
    quotes = [f for f in facts if first_person(f)]
    if len(quotes) == len(facts):
        return facts, []
    return [f for f in facts if not first_person(f)], quotes
