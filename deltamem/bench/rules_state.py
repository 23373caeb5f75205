"""Each fact rule's ablation line in memory-state F1, on a replayed HaluMem run.

`rules_replay.replay_run` sends a run's logged extractor replies through the rules
again and records, for every written fact, what is kept with all rules on and with
each rule that touched it switched off. A HaluMem run also logged, for each
evaluated session, its gold memory points. Putting the two together gives the
question a rule has to answer to stay: is the bank nearer the gold state with the
rule than without it? The figure is `state_f1` as `bench halumem` computes it (mean
`r_trans` of `deltamem.train.distance.state_distance` over the evaluated sessions),
on the facts the fact stage keeps. What the decide stage does after that (a fact
already stored, an update instead of an add) is not replayed, so "all rules" sits
near, not on, the logged figure; both are printed.

Two ceilings are printed beside them: the state F1 of a perfect filter (one that
keeps exactly the facts within `tau` of one of the session's gold points) applied to
what the rules keep, and to everything the extractor wrote. Where the rules sit far
below the first, a better filter could pay; where the ceiling itself is low, only a
better extractor can.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.rules_replay import RunScore
from deltamem.embed import Embedder
from deltamem.rules import RULES, rules_for
from deltamem.train.distance import DEFAULT_TAU, state_distance

ALL = "all rules"
NONE = "no fact rule"
# the ceilings: a filter that kept exactly the facts near a gold point (cosine >= tau)
BEST_OF_KEPT = "a perfect filter after the rules"
BEST_OF_WRITTEN = "a perfect filter instead of the rules"


@dataclass
class StateAblation:
    logged: float  # the run's own state_f1 (after the decide stage)
    sessions: int
    f1: dict[str, float] = field(default_factory=dict)  # ALL, NONE, and each code: rule off
    facts: dict[str, int] = field(default_factory=dict)  # facts kept under each variant

    def delta(self, code: str) -> float:
        """What switching the rule off does to state F1 (negative: the rule pays)."""
        return self.f1[code] - self.f1[ALL]


def gold_states(run: Path) -> dict[str, tuple[list[str], float]]:
    """session id -> (gold points, logged r_trans) of `deltamem`'s evaluated sessions."""
    out: dict[str, tuple[list[str], float]] = {}
    path = run / "results.jsonl"
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if (
            rec.get("kind") == "session"
            and rec.get("system") == "deltamem"
            and rec.get("state")
            and not rec.get("filler")
        ):
            out[rec["session_id"]] = (list(rec["gold"]), float(rec["state"]["r_trans"]))
    return out


class _CachedEmbed:
    """Each sentence embedded once across the variants."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if new:
            self.vectors.update(zip(new, self.embedder.embed(new), strict=True))
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts])


def _banks(facts: list[dict[str, Any]], code: str | None) -> dict[str, list[str]]:
    """Per session, the facts kept with `code` off (None: all rules on; NONE: none)."""
    out: dict[str, list[str]] = defaultdict(list)
    for f in facts:
        if code == NONE:
            text: str | None = f["written"]
        elif code is not None and code in f["kept_if_off"]:
            text = f["kept_if_off"][code]
        else:
            text = f["kept_as"]
        if text is not None:
            out[f["session"]].append(text)
    return out


def state_ablation(
    run: Path, score: RunScore, embedder: Embedder, tau: float = DEFAULT_TAU
) -> StateAblation | None:
    """State F1 of the replayed facts with all rules, none, and each rule off; None
    where the run logged no gold state (not a HaluMem run)."""
    gold = gold_states(run)
    if not gold:
        return None
    embed = _CachedEmbed(embedder)
    out = StateAblation(logged=float(np.mean([g[1] for g in gold.values()])), sessions=len(gold))
    codes = [r.code for r in rules_for("fact")] + [RULES["NOTHING_NEW"].code]
    banks = {v: _banks(score.facts, None if v == ALL else v) for v in [ALL, NONE, *codes]}
    banks[BEST_OF_KEPT] = _near_gold(banks[ALL], gold, embed, tau)
    banks[BEST_OF_WRITTEN] = _near_gold(banks[NONE], gold, embed, tau)
    for variant, bank in banks.items():
        r = [
            state_distance(bank.get(sid, []), points, embed=embed, tau=tau).r_trans
            for sid, (points, _) in gold.items()
        ]
        out.f1[variant] = float(np.mean(r))
        out.facts[variant] = sum(len(bank.get(sid, [])) for sid in gold)
    return out


def _near_gold(
    bank: dict[str, list[str]],
    gold: dict[str, tuple[list[str], float]],
    embed: _CachedEmbed,
    tau: float,
) -> dict[str, list[str]]:
    """Per session, the facts within `tau` (cosine) of one of its gold points."""
    out: dict[str, list[str]] = {}
    for sid, (points, _) in gold.items():
        facts = bank.get(sid, [])
        if not facts or not points:
            out[sid] = []
            continue
        best = (embed(facts) @ embed(points).T).max(axis=1)  # unit rows: cosine
        out[sid] = [f for f, b in zip(facts, best, strict=True) if b >= tau]
    return out


def state_table(ablations: dict[str, StateAblation]) -> str:
    """Markdown: per rule, each HaluMem run's state F1 with that rule off and the change."""
    head = "| rule |" + "".join(f" {name}: state F1 with it off (change) |" for name in ablations)
    lines = [head, "|---|" + "---|" * len(ablations)]

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} |" + "".join(f" {cell(a)} |" for a in ablations.values()))

    row("logged by the run", lambda a: f"{a.logged:.3f}")
    row(f"**{ALL}**", lambda a: f"**{a.f1[ALL]:.3f}** ({a.facts[ALL]} facts)")
    row(NONE, lambda a: f"{a.f1[NONE]:.3f} ({a.f1[NONE] - a.f1[ALL]:+.3f})")
    for ceiling in (BEST_OF_KEPT, BEST_OF_WRITTEN):
        row(ceiling, lambda a, c=ceiling: f"{a.f1[c]:.3f} ({a.facts[c]} facts)")
    for code in [r.code for r in rules_for("fact")] + ["NOTHING_NEW"]:
        row(f"`{code}`", lambda a, c=code: f"{a.f1[c]:.3f} ({a.delta(c):+.3f})")
    return "\n".join(lines)
