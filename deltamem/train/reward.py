"""The GRPO reward of one completion for one user turn (`ExtractionReward`).

reward = 0.1·format + 0.1·retrieval + 0.8·r_trans (`distance.reward`):

* format: the completion is one JSON object `{"facts": [strings]}` (1 or 0). A
  reply of no such shape at all (even closing a truncated one, as `complete_json`
  does) scores 0 in total;
* retrieval: the share of the completion's facts that pass the reward's own rules
  (`reward_rules.RewardRules`: in the third person, names the person, grounded in
  the turn's words, not too long); no facts: 1;
* r_trans: the state distance (`distance.state_distance`) between the facts that
  pass and the turn's gold facts, keyword fidelity from the gold keywords.

The facts are the reply's items as written (spaces collapsed, repeats and empty
items dropped, at most `max_facts`). This module owes nothing to the manager: not
its write rules, not its rewriting of facts. The import contract in pyproject.toml
(`lint-imports`) holds it to that. Each completion's `RewardParts` names the rules
that scored it and, for each fact refused, the rules it failed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deltamem.llm.jsonrepair import close_truncated
from deltamem.train.distance import EmbedFn, reward, state_distance
from deltamem.train.reward_rules import FactContext, RewardRules


@dataclass
class RewardParts:
    format: float
    retrieval: float
    r_trans: float
    reward: float
    facts: list[str] = field(default_factory=list)  # what the reply lists, as parsed
    kept: list[str] = field(default_factory=list)  # what passes every enabled rule
    rules: list[str] = field(default_factory=list)  # the rules that scored the facts
    refused: dict[str, list[str]] = field(default_factory=dict)  # fact -> rules it failed


def completion_text(completion: Any) -> str:
    """A completion as TRL hands it: a string, or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def _facts_shape(value: Any) -> bool:
    """`{"facts": [strings]}` (other keys aside)."""
    facts = value.get("facts") if isinstance(value, dict) else None
    return isinstance(facts, list) and all(isinstance(f, str) for f in facts)


def parse_reply(text: str) -> tuple[dict[str, Any] | None, bool]:
    """(the reply as a `{"facts": [...]}` object, whether it was well-formed as is)."""
    strict = True
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        strict = False
        value = close_truncated(text)
    if not isinstance(value, dict) or not _facts_shape(value):
        return None, False
    return value, strict


def listed_facts(reply: dict[str, Any], limit: int) -> list[str]:
    """The reply's facts as written: spaces collapsed, empty items and repeats
    (case and a final full stop aside) dropped, the first `limit`."""
    seen: set[str] = set()
    out: list[str] = []
    for item in reply.get("facts") or []:
        text = " ".join(str(item).split())
        key = text.lower().rstrip(".")
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(text)
    return out[:limit]


class ExtractionReward:
    """The reward of one completion for one turn; callable as a TRL reward function
    (the dataset's columns arrive as keyword arguments). Embeddings are cached.
    `rules`: the reward's rule set (default: every rule, default numbers)."""

    __name__ = "deltamem_reward"  # TRL names the logged reward after it

    def __init__(self, embed: EmbedFn, rules: RewardRules | None = None) -> None:
        self._embed = embed
        self.rules = rules if rules is not None else RewardRules()
        self._cache: dict[str, np.ndarray] = {}
        self.last: list[RewardParts] = []  # the parts of the latest call

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            for t, v in zip(new, np.asarray(self._embed(new)), strict=True):
                self._cache[t] = v
        if len(self._cache) > 50_000:  # a long run: keep memory bounded
            self._cache = {t: self._cache[t] for t in texts}
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1))

    def score(
        self,
        completion: str,
        *,
        subject: str,
        said: str,
        before: str,
        gold: Sequence[str],
        gold_keywords: Sequence[Sequence[str]],
    ) -> RewardParts:
        rules = list(self.rules.enabled)
        reply, strict = parse_reply(completion.strip())
        if reply is None:
            return RewardParts(0.0, 0.0, 0.0, 0.0, rules=rules)
        facts = listed_facts(reply, self.rules.max_facts)
        ctx = FactContext(subject=subject, said=said, before=before)
        failed = {f: self.rules.failed(f, ctx) for f in facts}
        kept = [f for f in facts if not failed[f]]
        refused = {f: why for f, why in failed.items() if why}
        retrieval = len(kept) / len(facts) if facts else 1.0
        if kept and gold:
            dist = state_distance(
                kept,
                list(gold),
                target_keywords=[list(k) for k in gold_keywords],
                pred_vectors=self.vectors(kept),
                target_vectors=self.vectors(list(gold)),
            )
            r_t = dist.r_trans
        else:
            r_t = 1.0 if not kept and not gold else 0.0
        fmt = 1.0 if strict else 0.0
        return RewardParts(
            fmt, retrieval, r_t, reward(fmt, retrieval, r_t), facts, kept, rules, refused
        )

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        subject: Sequence[str],
        said: Sequence[str],
        before: Sequence[str],
        gold: Sequence[Sequence[str]],
        gold_keywords: Sequence[Sequence[Sequence[str]]],
        **_: Any,
    ) -> list[float]:
        self.last = [
            self.score(
                completion_text(c),
                subject=subject[i],
                said=said[i],
                before=before[i],
                gold=gold[i],
                gold_keywords=gold_keywords[i],
            )
            for i, c in enumerate(completions)
        ]
        return [p.reward for p in self.last]


def refusals(parts: Sequence[RewardParts]) -> dict[str, int]:
    """How many facts each rule refused, over `parts` (a step's completions)."""
    out: dict[str, int] = {}
    for p in parts:
        for why in p.refused.values():
            for name in why:
                out[name] = out.get(name, 0) + 1
    return out
