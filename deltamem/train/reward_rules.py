"""The training reward's own rules for a fact: a few general, named checks.

The GRPO reward (`deltamem/train/reward.py`) scores the facts a completion lists
against these rules, not against the manager's write rules: a reward that owes
nothing to the product's checks cannot be won by learning their blind spots, and
the product's rules can change without changing what was trained. An import
contract (pyproject.toml, `lint-imports` in `make test`) keeps this module and the
reward from importing the manager, its rules, `deltamem.yesno` or
`deltamem.superseded`.

Each rule says whether a fact passes; `RewardRules` is the config: which rules are
enabled, and their few numbers. The reward records, for each completion, the rules
that scored it and those each refused fact failed, so that training on them (and
any reward hacking against them) can be read from its records.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from typing import Any

from deltamem.porter import stem
from deltamem.text import terms, words


@dataclass(frozen=True)
class FactContext:
    """What a fact is checked against: the person's name, their message, and the
    assistant's message before it ("" if none)."""

    subject: str
    said: str
    before: str = ""


# first and second person: the fact speaks as the person, or to them. A lone "I"
# counts capitalised only ("i" may be a list marker), a word in capitals not at all
# ("the US", "ME")
_FIRST_OR_SECOND = re.compile(
    r"\b(?:i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|us|our|ours|ourselves"
    r"|you|you're|you've|your|yours|yourself)\b",
    re.IGNORECASE,
)
_I = re.compile(r"\bI\b")


def third_person(fact: str, ctx: FactContext, rules: RewardRules) -> bool:
    """No first- or second-person word ("I", "my", "we", "you"): the fact is told
    of the person, not in their voice."""
    text = fact.replace("’", "'")
    if _I.search(text):
        return False
    return not any(not m.group(0).isupper() for m in _FIRST_OR_SECOND.finditer(text))


def _name_words(subject: str) -> set[str]:
    return {w.lower() for w in words(subject) if len(w) > 1 and w.lower() != "the"}


def names_person(fact: str, ctx: FactContext, rules: RewardRules) -> bool:
    """A word of the person's name ("Dana", "Reyes"; "user" for "The user") is in
    the fact, so it stands on its own in a store of many people's memories."""
    said = {w.lower().replace("’", "'").removesuffix("'s") for w in words(fact)}
    return bool(_name_words(ctx.subject) & said)


def _stems(text: str, skip: AbstractSet[str] = frozenset()) -> set[str]:
    return {stem(t) for t in terms(text, limit=10_000) if t not in skip}


def grounded(fact: str, ctx: FactContext, rules: RewardRules) -> bool:
    """At least `grounded_share` of the fact's content words (stemmed, the person's
    name left out) are words of the turn: the person's message or the assistant's
    message it answers. A fact with no content word past the name says nothing."""
    own = _stems(fact, _name_words(ctx.subject))
    if not own:
        return False
    heard = _stems(f"{ctx.said}\n{ctx.before}")
    return len(own & heard) / len(own) >= rules.grounded_share


def not_too_long(fact: str, ctx: FactContext, rules: RewardRules) -> bool:
    """At most `max_words` words: one fact, not a summary of the turn."""
    return len(fact.split()) <= rules.max_words


Rule = Callable[[str, FactContext, "RewardRules"], bool]
RULES: dict[str, Rule] = {
    "third_person": third_person,
    "names_person": names_person,
    "grounded": grounded,
    "not_too_long": not_too_long,
}


@dataclass(frozen=True)
class RewardRules:
    """The reward's rule set: the enabled rules, by name (`RULES`), and their numbers.
    A fact is kept when it passes every enabled rule."""

    enabled: tuple[str, ...] = ("third_person", "names_person", "grounded", "not_too_long")
    grounded_share: float = 0.5  # of the fact's content words, found in the turn
    max_words: int = 30  # per fact
    max_facts: int = 6  # facts read from one completion, the rest left out

    def __post_init__(self) -> None:
        unknown = [n for n in self.enabled if n not in RULES]
        if unknown:
            raise ValueError(f"unknown reward rules {unknown}; known: {sorted(RULES)}")

    def failed(self, fact: str, ctx: FactContext) -> list[str]:
        """The enabled rules the fact fails ([]: kept)."""
        return [name for name in self.enabled if not RULES[name](fact, ctx, self)]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["enabled"] = list(self.enabled)
        return out
