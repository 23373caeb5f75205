"""What a rule is, and the settings that switch rules off or move their thresholds.

Every check, rewrite and refusal of the write and read paths is a `Rule`: a stable
code (`ATTRIBUTED_TO_OTHER`), the stage it runs at, the languages it reads, and a
one-line summary of what it refuses or rewrites. Fact-stage rules carry their
check (`apply`) and run in `deltamem.rules.pipeline`, in the stage's order; the
rules of the other stages run where their data is (the decision against stored
memories, the context the answerer reads) and ask `RuleSettings.on` first, so
each can be switched off and every firing is counted by its code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from deltamem.rules.pipeline import FactInput

# fact: one written fact against its turn; session: a fact against the rest of the
# session; decide: a fact against the stored memories; context: what the answerer
# reads; answer: the answerer's reply
Stage = Literal["fact", "session", "decide", "context", "answer"]
STAGES: tuple[Stage, ...] = ("fact", "session", "decide", "context", "answer")
Effect = Literal["refuse", "rewrite", "filter", "invalidate"]


@dataclass(frozen=True)
class Outcome:
    """A rule that fired: `rewrite` is the fact as the rule leaves it (a rewrite
    rule), None for a refusal."""

    code: str
    detail: str
    rewrite: str | None = None


@dataclass(frozen=True)
class Rule:
    code: str
    stage: Stage
    effect: Effect
    summary: str  # what it refuses or rewrites, in a line
    # the languages whose words it reads (ISO 639-1); None: any language
    languages: frozenset[str] | None = None
    # fact-stage rules only: the check itself (None: it passes)
    apply: Callable[[FactInput], Outcome | None] | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def reads(self, language: str) -> bool:
        return self.languages is None or language in self.languages


@dataclass(frozen=True)
class RuleSettings:
    """Which rules run and at what thresholds (`ManagerConfig.rules`).

    `off`: codes of rules switched off; `thresholds`: overrides as
    {"CODE.name": value}, e.g. {"NOT_GROUNDED.share": 0.6}."""

    off: frozenset[str] = frozenset()
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def on(self, code: str) -> bool:
        return code not in self.off

    def threshold(self, rule: Rule, name: str) -> float:
        return float(self.thresholds.get(f"{rule.code}.{name}", rule.thresholds[name]))

    def without(self, *codes: str) -> RuleSettings:
        return RuleSettings(self.off | frozenset(codes), self.thresholds)


DEFAULT = RuleSettings()
