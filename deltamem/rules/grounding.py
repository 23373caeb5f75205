"""General fact checks: the fact is the person's, in the third person, and made of
what was said. They read words and names, not English grammar, so most run in any
language (`deltamem.rules.registry` says which)."""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllLemmas  # type: ignore[import-untyped]

from deltamem.porter import stem
from deltamem.rules.base import Outcome
from deltamem.rules.pipeline import FactInput
from deltamem.text import STOPWORDS, terms, words
from deltamem.types import MAX_MEMORY_CHARS

# words a fact may add to what was said without inventing anything
_FREE = frozenset(
    "user person name named called january february march april may june july august "
    "september october november december week weekend month year day date".split()
)
FREE_STEMS = frozenset(stem(w) for w in _FREE)
MIN_WORDS = 3  # fewer is a fragment

# the speaker's own words, by language: a fact that keeps one is the person's
# sentence, not a fact about them ("... helping me stay focused")
FIRST_PERSON_WORDS = {
    "en": frozenset(
        "i i'm i've i'd i'll me my mine myself we we're we've we'd we'll us our ours "
        "ourselves".split()
    ),
    "es": frozenset(
        "yo me mi mis mío mía míos mías conmigo nosotros nosotras nuestro nuestra "
        "nuestros nuestras".split()
    ),
    "de": frozenset(
        "ich mich mir mein meine meinen meinem meiner meines wir uns unser unsere "
        "unseren unserem unserer".split()
    ),
    "fr": frozenset("je j' moi mon ma mes nous notre nos".split()),
}
# "me", "my": told of the person where the fact is theirs ("sharing my experiences"
# -> "sharing their experiences"); an "I" or a "we" is not rewritten (whose verb,
# who "we" are, is not the fact's to say)
# "our" of a group the person speaks for ("investing in our future generations",
# "unemployment in our community") is told as "the": whose it is, the fact does not say
_TOLD = {"me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "our": "the"}
_TOLD_WORD = re.compile(r"\b(me|my|mine|myself|our)\b", re.IGNORECASE)


def person_stems(subject: str) -> set[str]:
    """Stems of the words that name the person ("user" always does)."""
    return {stem(w.lower()) for w in words(subject)} - {"the"} | {"user"}


def forms(word: str) -> set[str]:
    """A fact word's stems, with the verb it is made from ("dancer" -> dance,
    "leader" -> lead, "gamer" -> game): a word made from a verb that was said counts
    as said."""
    out = {stem(word)}
    if word.endswith(("er", "or")) and len(word) > 4:
        out |= {stem(word[:-2]), stem(word[:-1])}
    return out


def content_stems(fact: str, names: set[str]) -> set[str]:
    """A fact's content words, stemmed, less the person's name and the free words."""
    return {stem(t) for t in terms(fact, limit=64)} - names - FREE_STEMS


@lru_cache(maxsize=16)
def function_words(language: str) -> frozenset[str]:
    """Stems of a language's function words ("es", "una", "der"), which say nothing
    of the person; English's are left out by `terms` already (deltamem.text)."""
    if language == "en":
        return frozenset()
    from stop_words import LANGUAGE_MAPPING, get_stop_words  # type: ignore[import-untyped]

    if language not in LANGUAGE_MAPPING:
        return frozenset()
    return frozenset(stem(w.lower()) for w in get_stop_words(language))


_CLIPPED_MAX = 5  # letters: "edu", "comps", "convo", "rehab"


@lru_cache(maxsize=1024)  # asked of every clause for every fact of a turn
def clippings(text: str, language: str = "en") -> frozenset[str]:
    """The chat's clipped words in `text` ("edu", "comps", "info"), each standing for
    a longer word ("education", "competitions", "information"): English words in
    lower case (a capital is a name: "Tim" is no "time"), of three letters or more,
    that the lexicon does not know; a plural's "s" dropped. The lexicon knows no
    function words ("for" is no "forward"), and a clipping is short ("storytelling",
    unknown to it, is no clipping)."""
    if language != "en":
        return frozenset()
    out = set()
    for w in words(text):
        if not 3 <= len(w) <= _CLIPPED_MAX or not w.isalpha() or not w.islower():
            continue
        if w in STOPWORDS or getAllLemmas(w):
            continue
        out.add(w[:-1] if w.endswith("s") and len(w) > 3 else w)
    return frozenset(out)


def clipped(word: str, clipped_words: frozenset[str]) -> bool:
    """Whether `word` is one of `clipped_words` written in full ("education": "edu")."""
    w = word.lower()
    return any(len(w) >= len(c) + 2 and w.startswith(c) for c in clipped_words)


def share_heard(
    fact: str,
    names: set[str],
    heard: set[str],
    language: str = "en",
    clipped_words: frozenset[str] = frozenset(),
) -> float | None:
    """The share of a fact's content words that occur in `heard` (stems, by their
    `forms`), or in full for one of `clipped_words`; None for a fact with no content
    word."""
    found: dict[str, bool] = {}
    skip = function_words(language)
    for t in terms(fact, limit=64):
        s = stem(t)
        if s in names or s in FREE_STEMS or s in skip:
            continue
        found[s] = found.get(s, False) or bool(forms(t) & heard) or clipped(t, clipped_words)
    return sum(found.values()) / len(found) if found else None


def first_person_words(text: str, language: str) -> list[str]:
    """The speaker's own words in `text` ("US", the country, is not "us")."""
    own = FIRST_PERSON_WORDS.get(language, frozenset())
    return [w for w in words(text.replace("’", "'")) if w.lower() in own and w != "US"]


def too_long(given: FactInput) -> Outcome | None:
    if len(given.fact) > MAX_MEMORY_CHARS:
        return Outcome("TOO_LONG", "fact too long")
    return None


def fragment(given: FactInput) -> Outcome | None:
    if len(given.fact.split()) < MIN_WORDS:
        return Outcome("FRAGMENT", "fragment, not a fact")
    return None


def first_person_told(given: FactInput) -> Outcome | None:
    """A fact about the person that keeps the speaker's "me", "my" or "our" after
    their name: those words are the person's, told of them."""
    fact = given.fact
    if not fact.lower().startswith(given.subject.lower()) or not _TOLD_WORD.search(fact):
        return None
    if any(w.lower() not in _TOLD for w in first_person_words(fact, "en")):
        return None  # an "I" or a "we" too: refused below, not half rewritten
    told = _TOLD_WORD.sub(lambda m: _TOLD[m.group(1).lower()], fact)
    return Outcome("FIRST_PERSON_TOLD", "the speaker's me/my told of the person", told)


def first_person(given: FactInput) -> Outcome | None:
    found = first_person_words(given.fact, given.language)
    if found:
        return Outcome(
            "FIRST_PERSON",
            f"first person ({found[0]}): the user's words, not a fact about them",
        )
    return None


def _bare(word: str) -> str:
    """A word without its possessive ("John's" -> "john")."""
    return re.sub(r"['’]s?$", "", word.lower())


def not_named(given: FactInput) -> Outcome | None:
    names = person_stems(given.subject)
    if not {stem(_bare(w)) for w in words(given.fact)} & names:
        return Outcome("NOT_NAMED", "does not name the person")
    return None


def says_nothing(given: FactInput) -> Outcome | None:
    """No content word besides the name, or the person said to be their own name or
    a thing of theirs ("Maria is Maria's family", "John is called John")."""
    names = person_stems(given.subject)
    if not content_stems(given.fact, names) - function_words(given.language):
        return Outcome("SAYS_NOTHING", "says nothing about the person")
    who = re.escape(given.subject)
    if re.match(rf"{who}\s+(?:is|was)\s+(?:called\s+|named\s+)?{who}\b", given.fact, re.I):
        return Outcome("SAYS_NOTHING", "says the person is their own name")
    return None


def not_grounded(given: FactInput) -> Outcome | None:
    from deltamem.rules.registry import RULES

    heard = f"{given.said} {given.before or ''}"
    share = share_heard(
        given.fact,
        person_stems(given.subject),
        given.heard,
        given.language,
        clippings(heard, given.language),
    )
    if share is not None and share < given.settings.threshold(RULES["NOT_GROUNDED"], "share"):
        return Outcome("NOT_GROUNDED", "not grounded in the conversation")
    return None


def assistants_words(given: FactInput) -> Outcome | None:
    """A fact made of the assistant's words (its suggestions, its praise) is not
    something the person said of themselves; an answer to its question makes the
    question's words the person's, so the bar is lower there."""
    from deltamem.rules.registry import RULES

    rule = RULES["ASSISTANTS_WORDS"]
    share = share_heard(
        given.fact,
        person_stems(given.subject),
        given.own,
        given.language,
        clippings(given.said, given.language),
    )
    name = "answering" if given.answered else "share"
    if share is not None and share < given.settings.threshold(rule, name):
        return Outcome("ASSISTANTS_WORDS", "the assistant's words, not the person's")
    return None
