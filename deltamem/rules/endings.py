"""The words that end a state or take one back, by language (rules ENDED_BY_LATER and
TAKEN_BACK_BY_LATER, `deltamem.manager.outdate`).

A fact is read with its own language's patterns (`language_of`): "left Northwind
Bank", "dejó el hospital de Sevilla", "hat Siemens verlassen", "a quitté Renault"
end a named thing; "no longer drinks coffee", "ya no toma café", "trinkt keinen
Kaffee mehr", "ne boit plus de café" take something back; "quit smoking", "dejó de
fumar", "hat aufgehört zu rauchen", "a arrêté de fumer" end an activity. What is
taken back is compared with the older memories by the stems of that language
(Snowball's), so "fumar" meets "fuma".

Each pattern names what ended `ended`, and what is taken back `what` (and, where
the verb and its object sit apart, `obj`: German's "trinkt keinen Kaffee mehr").
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

from deltamem.porter import stem
from deltamem.rules.grounding import function_words
from deltamem.rules.language import ENGLISH, likeliest
from deltamem.text import terms

# where a clause ends, after what is ended or taken back
_UNTIL = r"[^,.;!?]+"

# what ends a state, the thing ended after it ("left Northwind Bank", "quit Haukeland
# Hospital", "moved out of the King Street flat", "stopped playing with the Riverside
# Rovers"), up to the end of the clause
ENDS: dict[str, list[re.Pattern[str]]] = {
    "en": [
        re.compile(
            r"\b(?:left|quit|resigned\s+from|retired\s+from|dropped\s+out\s+of|gave\s+up|"
            r"moved\s+(?:out\s+of|away\s+from|from)|broke\s+up\s+with|split\s+up\s+with|"
            r"divorced|sold|stopped(?:\s+\w+ing)?(?:\s+(?:with|at|for|in))?|"
            rf"no\s+longer\s+\w+(?:\s+(?:with|at|for|in))?)\s+(?P<ended>{_UNTIL})",
            re.IGNORECASE,
        )
    ],
    "es": [
        re.compile(
            r"\b(?:(?:se\s+)?dej[óoé]|ha\s+dejado|abandon[óoé]|renunci[óoé]\s+a|"
            r"se\s+(?:fue|march[óoé]|mud[óoé])\s+de|vendi[óo]|vend[ií]|"
            r"(?:rompi[óo]|romp[ií])\s+con|se\s+(?:separ|divorci)[óoé]\s+de|"
            r"se\s+jubil[óoé]\s+de|ya\s+no\s+\w+(?:\s+(?:en|con|para|de))?)\s+"
            rf"(?P<ended>{_UNTIL})",
            re.IGNORECASE,
        )
    ],
    "de": [
        re.compile(
            r"\b(?:verließ|verlässt|verliess|kündigte\s+(?:bei|an)|zog\s+aus|"
            r"trennte\s+sich\s+von|verkaufte|\w+\s+nicht\s+mehr\s+(?:bei|an|in|für))\s+"
            rf"(?P<ended>{_UNTIL})",
            re.IGNORECASE,
        ),
        # the verb last: "hat Siemens verlassen", "ist aus Berlin weggezogen"
        re.compile(
            r"\b(?:hat|hatte|ist|war)\s+(?:aus\s+|bei\s+)?(?P<ended>[^,.;!?]+?)\s+"
            r"(?:verlassen|gekündigt|verkauft|(?:weg|aus|fort)gezogen)\b",
            re.IGNORECASE,
        ),
    ],
    "fr": [
        re.compile(
            r"\b(?:a\s+quitté|quitte|quitta|a\s+démissionné\s+de|a\s+déménagé\s+de|"
            r"a\s+vendu|a\s+rompu\s+avec|s'est\s+séparée?\s+de|"
            r"ne\s+\w+\s+plus\s+(?:à|chez|pour|avec))\s+"
            rf"(?P<ended>{_UNTIL})",
            re.IGNORECASE,
        )
    ],
}
# the words that end a clause after the thing ended ("left Northwind Bank and joined ...")
CLAUSE_END: dict[str, re.Pattern[str]] = {
    lang: re.compile(rf"\s+(?:{words})\s+.*$", re.IGNORECASE)
    for lang, words in {
        "en": "and|but|because|after|since|to|so|when|where",
        "es": "y|e|pero|porque|después|desde|para|cuando|donde",
        "de": "und|aber|weil|nachdem|seit|um|als|wo",
        "fr": "et|mais|parce|après|depuis|pour|quand|où",
    }.items()
}
# the thing ended is named: a capital or a number, after an article or a possessive
# ("the King Street flat"; "left a review for Cafe Nero" ends no named thing); in
# Spanish and French the name may follow the noun ("el hospital de Sevilla")
_ARTICLES = {
    "en": "the|my|her|his|their",
    "es": "el|la|los|las|su|sus|mi|mis|del",
    "de": "der|die|das|den|dem|des|sein|seine|seinen|seinem|ihr|ihre|ihren|ihrem|mein|meine",
    "fr": "le|la|les|l'|son|sa|ses|mon|ma|mes",
}
_NAME_AFTER = {"es": r"(?:\w+\s+){1,2}(?:de|del)\s+", "fr": r"(?:\w+\s+){1,2}(?:de|du|d')\s*"}
NAMED_THING: dict[str, re.Pattern[str]] = {
    lang: re.compile(
        rf"^(?:(?:{articles})\s+(?:{_NAME_AFTER[lang]})?)?[A-ZÀ-Ý0-9]"
        if lang in _NAME_AFTER
        else rf"^(?:(?:{articles})\s+)?[A-ZÀ-Ý0-9]"
    )
    for lang, articles in _ARTICLES.items()
}

# what a fact says no longer holds: "no longer drinks coffee", "the wedding is on
# June 14th, not in May", "lives in Lyon and not in Paris"
TAKEN_BACK: dict[str, list[re.Pattern[str]]] = {
    "en": [
        re.compile(
            r"(?:\bno\s+longer|,\s*not|\band\s+not)\s+(?P<what>[^,.;!?]+?)"
            r"(?=[,.;!?]|\s+(?:but|and|because|as)\b|$)",
            re.IGNORECASE,
        )
    ],
    "es": [
        re.compile(
            r"\bya\s+no\s+(?P<what>[^,.;!?]+?)(?=[,.;!?]|\s+(?:pero|y|porque)\b|$)",
            re.IGNORECASE,
        )
    ],
    "de": [
        # "trinkt keinen Kaffee mehr", "raucht nicht mehr", "wohnt nicht mehr in Köln"
        re.compile(
            r"\b(?P<what>\w+)\s+(?:nicht\s+mehr|kein\w*)\s*(?P<obj>[^,.;!?]*?)(?:\s+mehr)?"
            r"(?=[,.;!?]|\s+(?:aber|und|weil)\b|$)",
            re.IGNORECASE,
        )
    ],
    "fr": [
        # "ne boit plus de café", "n'habite plus à Lyon"
        re.compile(
            r"\bn(?:e\s+|')(?P<what>\w+)\s+plus\s*(?P<obj>[^,.;!?]*?)"
            r"(?=[,.;!?]|\s+(?:mais|et|parce)\b|$)",
            re.IGNORECASE,
        )
    ],
}
# an activity ended: "quit smoking", "gave up running", "stopped playing football"
QUIT_DOING: dict[str, list[re.Pattern[str]]] = {
    "en": [
        re.compile(
            r"\b(?:quit|gave\s+up|stopped|has\s+stopped)\s+"
            r"(?P<what>\w+ing(?:\s+(?!in\b|on\b|at\b)\w+)?)",
            re.IGNORECASE,
        )
    ],
    "es": [
        re.compile(
            r"\b(?:dej[óoé]|ha\s+dejado|dejado)\s+de\s+(?P<what>\w+(?:\s+(?!en\b|con\b)\w+)?)",
            re.IGNORECASE,
        )
    ],
    "de": [
        re.compile(
            r"\b(?:hörte|hört|hat|hatte)\s+(?:\w+\s+)?auf(?:gehört)?,?\s+zu\s+(?P<what>\w+)",
            re.IGNORECASE,
        ),
        re.compile(r"\bmit\s+dem\s+(?P<what>\w+)\s+aufgehört\b", re.IGNORECASE),
    ],
    "fr": [
        re.compile(
            r"\b(?:arrêté|arrête|arrêta|cessé|cesse)\s+de\s+(?P<what>\w+(?:\s+(?!à\b|en\b)\w+)?)",
            re.IGNORECASE,
        )
    ],
}

_SNOWBALL = {"es": "spanish", "de": "german", "fr": "french"}
_local = threading.local()


@lru_cache(maxsize=4096)
def languages(fact: str) -> tuple[str, ...]:
    """The languages whose patterns read `fact`: English always, and the one of the
    others with patterns that it is likelier in, where that is likelier than English."""
    best = likeliest(fact, frozenset(ENDS))
    return (ENGLISH,) if best == ENGLISH else (ENGLISH, best)


def _stemmer(lang: str) -> Stemmer.Stemmer:
    stemmers = _local.__dict__.setdefault("stemmers", {})
    if lang not in stemmers:
        stemmers[lang] = Stemmer.Stemmer(_SNOWBALL[lang])
    return stemmers[lang]


@lru_cache(maxsize=8192)
def _stems(text: str, lang: str) -> frozenset[str]:
    if lang not in _SNOWBALL:
        return frozenset(stem(t) for t in terms(text, limit=100_000))
    return frozenset(_stemmer(lang).stemWords(content_words(text, lang)))


def content_words(text: str, lang: str) -> list[str]:
    """`text`'s words less its language's function words."""
    skip = function_words(lang) if lang in _SNOWBALL else frozenset()
    return [t for t in terms(text, limit=100_000) if stem(t) not in skip]


def holds(what: frozenset[str], stems: set[str], lang: str) -> bool:
    """Whether every stem of `what` is among `stems`; outside English a stem of four
    letters or more also meets one it begins or ends ("rauch" and "raucht": Snowball
    leaves some verb endings on)."""
    if lang == ENGLISH:
        return what <= stems
    return all(
        w in stems
        or (len(w) >= 4 and any(s.startswith(w) or w.startswith(s) for s in stems if len(s) >= 4))
        for w in what
    )


def shares(topic: frozenset[str], stems: set[str], lang: str) -> bool:
    """Whether any stem of `topic` is among `stems` (as `holds` meets them)."""
    return any(holds(frozenset({t}), stems, lang) for t in topic)


def stems_in(text: str, lang: str) -> set[str]:
    """The content words of `text`, stemmed for `lang` (Porter's for English)."""
    return set(_stems(text, lang))


def matched(pattern: re.Pattern[str], text: str, group: str) -> list[str]:
    """The text of `group` (joined with `obj` where the pattern has it) of every match."""
    out = []
    for m in pattern.finditer(text):
        parts = [m.group(group)]
        if "obj" in pattern.groupindex and m.group("obj"):
            parts.append(m.group("obj"))
        out.append(" ".join(parts))
    return out
