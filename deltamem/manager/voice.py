"""The person's own sentence, told of them: "I work as a nurse" -> "Ola works as a nurse".

On a short turn the 1.5B extractor often copies what the person said instead of
writing a fact about them ("I work as a nurse at Haukeland Hospital in Bergen",
"Sam and I broke up in the spring"). The sentence is the person's own, so it is
true of them; refusing it (a first-person sentence does not stand on its own as a
memory) loses the session's one fact. Here it is put in the third person: the
subject "I" becomes the person's name with its verb agreeing (lemminflect does the
inflection), "my" becomes "their", "me" "them". A verb whose present and past
are one word ("I quit", "I read") keeps its form, which reads as the past, as
such a sentence almost always means. Sentences with "we" are left as they are (who
"we" are is not said), and so are those with "you" (talk to the assistant: "I'd like
to share my Travel Preference with you" is no fact); the checks then refuse them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllInflections, getAllLemmas, getLemma  # type: ignore[import-untyped]

# words that may stand between "I" and its verb ("I also play", "I really love")
_ADVERBS = frozenset(
    "also still really usually often always never just only now sometimes recently "
    "currently actually mostly even generally normally regularly already truly".split()
)
_MODALS = frozenset("can could will would should might must may shall".split())
_ADVERB = "|".join(sorted(_ADVERBS))
# the speaker "I" as a subject: its contraction, the adverbs after it, and its verb
_I_VERB = re.compile(
    rf"\bI(?P<contracted>'m|'ve|'ll|'d)?(?P<gap>(?:\s+(?:{_ADVERB}))*)\s+(?P<verb>[A-Za-z']+)"
)
# "Sam and I", "My partner and I" opening the sentence: a subject of two, whose
# verb stays plural
_PAIR_BEFORE = re.compile(r"^(?:[\w'-]+\s+){1,4}and\s+$")
_ANY_I = re.compile(r"\bI(?:'m|'ve|'ll|'d)?\b")
_WE = re.compile(r"\b(?:we|we're|we've|our|us|you|your)\b", re.IGNORECASE)
_FIRST_WORDS = re.compile(r"\b(my|me|myself|mine)\b", re.IGNORECASE)
# "I'm", "I've", "I'll": what the auxiliary becomes for one person, and for two
_CONTRACTED = {"'m": ("is", "are"), "'ve": ("has", "have"), "'ll": ("will", "will")}
_NEGATED = {"don't": "doesn't", "haven't": "hasn't", "do": "does", "have": "has"}
# the speaker's other words, told of them
_OTHER = {"my": "their", "mine": "theirs", "me": "them", "myself": "themselves"}


def opens_with_verb(sentence: str) -> bool:
    """Whether a sentence opens with an inflected verb and so has no subject
    ("Finished in 3 hours 52 minutes.", "Loves the beaches there."): a past form or
    a third-person "-s" form that lemminflect knows as a verb. "Running is fun" and
    "Lagos is hot" open with a subject."""
    m = re.match(r"[A-Za-z]+", sentence)
    if m is None:
        return False
    word = m.group().lower()
    verb = getAllLemmas(word).get("VERB")
    return bool(verb) and verb[0] != word and not word.endswith("ing")


@lru_cache(maxsize=4096)
def third_singular(verb: str) -> str | None:
    """The third-person singular of a present-tense verb as "I" says it ("work" ->
    "works", "am" -> "is", "try" -> "tries"); None for a past form, a modal, or a
    word that is not a verb (it is left as it is)."""
    low = verb.lower()
    if low in _MODALS:
        return None
    if low in _NEGATED:
        return _NEGATED[low]
    lemmas = getLemma(low, upos="VERB")
    if not lemmas:
        return None
    forms = getAllInflections(lemmas[0], upos="VERB")
    if low not in forms.get("VBP", ()) or low in forms.get("VBD", ()):
        return None
    third = forms.get("VBZ")
    return third[0] if third else None


def in_third_person(sentence: str, subject: str) -> str | None:
    """`sentence` told of `subject` where the speaker's "I" is its subject ("I work
    ...", "I'm ...", "Sam and I broke up ...", "... because I love it"); None where
    there is no "I", or the sentence speaks for a "we" or to "you"."""
    s = sentence.strip().replace("\u2019", "'")
    if not _ANY_I.search(s) or _WE.search(s):
        return None

    def told(m: re.Match[str]) -> str:
        before = s[: m.start()]
        # "The user" opens a sentence; inside one it is "the user"
        who = subject if m.start() == 0 or not subject.startswith("The ") else subject.lower()
        pair = bool(_PAIR_BEFORE.match(before)) and not _ANY_I.search(before)
        gap, verb, short = m.group("gap"), m.group("verb"), m.group("contracted")
        if short == "'d":
            aux = (
                "had" if verb.lower() == "been" or verb.lower().endswith(("ed", "en")) else "would"
            )
            return f"{who} {aux}{gap} {verb}"
        if short:
            one, two = _CONTRACTED[short]
            return f"{who} {two if pair else one}{gap} {verb}"
        agreed = None if pair else third_singular(verb)
        return f"{who}{gap} {agreed or verb}"

    out = _I_VERB.sub(told, s)
    if _ANY_I.search(out):
        return None  # an "I" this does not read (at the end, before a quote)
    out = _FIRST_WORDS.sub(lambda w: _OTHER[w.group(1).lower()], out)
    return out[0].upper() + out[1:]
