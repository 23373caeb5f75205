"""A general truth is not the person's doing: "Spending time with loved ones is
important" -> "John enjoys spending time with loved ones".

People in a chat agree with each other in maxims ("Investing in our future
generations is key", "It's important to support each other"); the 1.5B extractor
writes each as what the speaker does or is. This check reads the clauses the fact
was made from (`deltamem.rules.sources`): where each is a maxim, an activity or a
quality as its subject, or "it's <word> to ...", with nothing of the speaker in it,
the fact is refused. English only (it reads English grammar).
"""

from __future__ import annotations

import re

from lemminflect import getAllLemmas  # type: ignore[import-untyped]

from deltamem.rules.base import Outcome
from deltamem.rules.grounding import FIRST_PERSON_WORDS
from deltamem.rules.pipeline import FactInput
from deltamem.rules.sources import WORD, Clause, sources

# "it's important to ...", "it is key to ...": a maxim by its form
_IT_IS = re.compile(
    r"^(?:\w+\s+)?it['’]?s\s+(?:\w+\s+)?\w+\s+to\b|^(?:\w+\s+)?it\s+is\s+\w+\s+to\b", re.I
)
# what a maxim says of its subject: it is, it can, it makes ... (not "we did")
_SAYS_OF_IT = frozenset(
    "is are can could will would makes make helps help brings bring turns turn".split()
)


def _is_activity(word: str) -> bool:
    """An "-ing" form of a verb ("spending", "networking") or a quality noun
    ("kindness", "compassion")."""
    if word.endswith("ing"):
        return bool(getAllLemmas(word).get("VERB"))
    return word.endswith(("ness", "sion", "tion", "ity"))


def maxim(clause: Clause) -> bool:
    tokens = [w.lower().replace("’", "'") for w in WORD.findall(clause.text)]
    if not tokens or set(tokens) & FIRST_PERSON_WORDS["en"]:
        return False
    if _IT_IS.match(clause.text.strip()):
        return True
    # the activity or quality heads the clause, and a verb of the maxim follows it
    # within a few words ("Spreading kindness and support can really make ...")
    return _is_activity(tokens[0]) and any(t in _SAYS_OF_IT for t in tokens[1:8])


def general_truth(given: FactInput) -> Outcome | None:
    if not given.fact.startswith(given.subject):
        return None
    found = sources(given.fact, given.subject, given.said, given.language)
    if found and all(maxim(c) for c in found):
        return Outcome("GENERAL_TRUTH", f"a maxim, not the person's doing: {found[0].text[:80]!r}")
    return None
