"""Text helpers the judges own: a question a yes or a no answers, an answer's opening
yes or no, and sentences.

The judges grade the product, so they read answers and memories by their own rules
and import nothing of the product's (the manager, its write rules, `deltamem.yesno`):
an import contract in pyproject.toml (`lint-imports`, run by `make test`) holds them
to it. See docs/judges.md.
"""

from __future__ import annotations

import re

from deltamem.text import sentences

__all__ = ["YES_NO_QUESTION", "after_opening", "opening", "sentences"]

# a question that opens with an auxiliary verb ("Did ...", "Would ...", "Is ...")
YES_NO_QUESTION = re.compile(
    r"^\s*(?:am|is|are|was|were|do|does|did|has|have|had|can|could|will|would|shall|should"
    r"|may|might|must)\b",
    re.IGNORECASE,
)
# a text's first word when it is "yes" or "no", hedged ("Likely no; ...", "Probably
# yes") or not, and the punctuation and spaces up to what follows
_OPENING = re.compile(
    r"^[\s\"'“‘(]*(?:(?:most\s+)?(?:likely|probably)[\s,;:]+)?(yes|no)\b[\s,.;:!—–-]*",
    re.IGNORECASE,
)


def opening(text: str) -> str | None:
    """ "yes" or "no" where the text opens with one, else None."""
    m = _OPENING.match(text)
    return m.group(1).lower() if m else None


def after_opening(text: str) -> str:
    """The text less its opening yes or no ("No, she did not." → "she did not.")."""
    m = _OPENING.match(text)
    return text[m.end() :] if m else text
