"""The fact-stage pipeline: one written fact through the fact rules, in order.

A rewrite rule changes the fact and the next rules read the new one; the first
refusal decides. With `trace=True` every refusal rule is asked (the first still
decides), so a replay (`deltamem bench rules`) can count how often each would fire
and what turning one off would let through.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from deltamem.rules.base import DEFAULT, Outcome, RuleSettings
from deltamem.rules.language import language_of
from deltamem.text import stems_of


@dataclass(frozen=True)
class FactInput:
    """A fact the extractor wrote, and the turn it was written from."""

    fact: str
    subject: str  # the person's name, or "The user"
    said: str  # the person's message (relative dates annotated)
    before: str | None  # the assistant's message just before it
    language: str = "en"
    settings: RuleSettings = field(default=DEFAULT)
    # the mean token log-probability the extractor wrote the fact with, if known
    confidence: float | None = None

    @cached_property
    def own(self) -> set[str]:
        """Stems of the person's message."""
        return stems_of(self.said)

    @cached_property
    def heard(self) -> set[str]:
        """Stems of the person's message and the assistant's before it."""
        return self.own | (stems_of(self.before) if self.before else set())

    @property
    def answered(self) -> bool:
        """Whether the message answers the assistant's question: then the question's
        words are the person's ("How long have you lived in Bergen?" "Five years")."""
        return self.before is not None and "?" in self.before


@dataclass(frozen=True)
class Verdict:
    fact: str  # the fact as kept, after any rewrites
    refused: Outcome | None  # the first refusal; None: kept
    rewrites: tuple[Outcome, ...] = ()
    fired: tuple[str, ...] = ()  # every refusal rule that fired (all of them with trace)

    @property
    def kept(self) -> bool:
        return self.refused is None

    @property
    def why(self) -> str | None:
        return self.refused.detail if self.refused else None


def check(
    fact: str,
    subject: str,
    said: str,
    before: str | None,
    *,
    settings: RuleSettings = DEFAULT,
    language: str | None = None,
    trace: bool = False,
    confidence: float | None = None,
) -> Verdict:
    """`fact` through the fact-stage rules that are on and read the turn's language;
    `confidence`: the extractor's mean token log-probability for it, if known."""
    from deltamem.rules.registry import rules_for  # the registry imports the rules

    lang = language or language_of(said)
    current = FactInput(fact, subject, said, before, lang, settings, confidence)
    rewrites: list[Outcome] = []
    fired: list[str] = []
    refused: Outcome | None = None
    for rule in rules_for("fact"):
        if not settings.on(rule.code) or not rule.reads(lang) or rule.apply is None:
            continue
        if refused is not None and not trace:
            break
        if refused is not None and rule.effect == "rewrite":
            continue  # a refused fact is not rewritten further; trace asks the refusals
        out = rule.apply(current)
        if out is None:
            continue
        if out.rewrite is not None:
            rewrites.append(out)
            current = replace(current, fact=out.rewrite)
            continue
        fired.append(out.code)
        refused = refused or out
    return Verdict(current.fact, refused, tuple(rewrites), tuple(fired))
