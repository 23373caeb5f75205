"""Which language a turn is in, so that English-only rules read English alone.

py3langid (langid.py's model) on the person's message. A short message says little
("Thanks!", "OK, sounds good"), so a turn is taken as English unless the model is
sure of another language: English rules then keep running where they always did.
"""

from __future__ import annotations

from functools import lru_cache

ENGLISH = "en"
# a non-English verdict stands where its language is the likeliest by this much
# (related languages share the rest: Spanish 0.81, Galician 0.06, Aragonese 0.06)
# and English is all but ruled out
LIKELY = 0.5
NOT_ENGLISH = 0.05
MIN_CHARS = 20  # shorter messages are taken as English


@lru_cache(maxsize=1)
def _identifier():  # type: ignore[no-untyped-def]
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@lru_cache(maxsize=4096)
def language_of(text: str) -> str:
    """The ISO 639-1 code of `text`'s language ("en", "es", "de", ...)."""
    if len(text.strip()) < MIN_CHARS:
        return ENGLISH
    ranked = _identifier().rank(text)
    lang, prob = ranked[0]
    english = next((float(p) for code, p in ranked if code == ENGLISH), 0.0)
    if lang != ENGLISH and float(prob) >= LIKELY and english < NOT_ENGLISH:
        return str(lang)
    return ENGLISH


def likeliest(text: str, among: frozenset[str]) -> str:
    """Which of `among` `text` is likeliest in, without `language_of`'s caution (a
    short fact, "Ana Ruiz se dejó el hospital de Sevilla", is still read as Spanish)."""
    ranked = {code: float(p) for code, p in _identifier().rank(text)}
    return max(sorted(among), key=lambda code: ranked.get(code, 0.0))


LANGUAGE_NAMES = {
    "es": "Spanish",
    "de": "German",
    "fr": "French",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "sv": "Swedish",
    "no": "Norwegian",
    "da": "Danish",
    "pl": "Polish",
}


def language_name(code: str) -> str | None:
    """The language's English name, for a prompt ("Spanish"); None if unknown."""
    return LANGUAGE_NAMES.get(code)
