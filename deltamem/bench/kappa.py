"""How far each judge can be trusted: its Cohen's κ against the hand labels, shown
beside every judged figure of a run's tables (`render.py`).

The figures are the committed agreement of the decomposed judges with the embedded
model on the labels' test half (`bench/agreement/decomposed-test/agreement.json`,
written by `deltamem bench agreement`; docs/judges.md). Where the package runs
without the repository beside it, the copy in `SNAPSHOT` stands in (a test keeps it
equal to the file). A κ under `BAR` (0.6, the issue's bar) is flagged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

AGREEMENT = (
    Path(__file__).resolve().parents[2]
    / "bench"
    / "agreement"
    / "decomposed-test"
    / "agreement.json"
)
BAR = 0.6
# the judges whose κ is shown, as `agreement.json` names them (`included`: the
# accuracy judge's "every piece is a reference fact" flag, behind target precision)
JUDGES = ("integrity", "accuracy", "included", "update", "qa", "locomo")


@dataclass(frozen=True)
class Agreement:
    kappa: dict[str, float | None]  # judge -> κ on the test half
    model: str
    mode: str
    # measured with the judges that no longer use the product's rules (issue 42):
    # `run_agreement` marks the files it writes since
    own_rules: bool
    source: str


SNAPSHOT = Agreement(
    kappa={
        "integrity": 0.785,
        "accuracy": 0.53,
        "included": 0.514,
        "update": 0.614,
        "qa": 0.678,
        "locomo": 0.682,
    },
    model="qwen2.5-coder-1.5b-instruct-q4_k_m",
    mode="decomposed",
    own_rules=True,
    source="bench/agreement/decomposed-test/agreement.json",
)


def from_report(report: dict[str, Any], source: str) -> Agreement:
    """The κ of each judge in an `agreement.json` (rounded to 3 places)."""
    kappa: dict[str, float | None] = {}
    for name in JUDGES:
        row = report.get("accuracy", {}).get("included") if name == "included" else report.get(name)
        value = (row or {}).get("kappa")
        kappa[name] = None if value is None else round(float(value), 3)
    meta = report.get("_meta") or {}
    return Agreement(
        kappa=kappa,
        model=str(meta.get("model", "")),
        mode=str(meta.get("mode", "")),
        own_rules=bool(meta.get("judges_own_rules", False)),
        source=source,
    )


@cache
def agreement() -> Agreement:
    """The committed figures: the file when the repository is there, else `SNAPSHOT`."""
    try:
        report = json.loads(AGREEMENT.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SNAPSHOT
    return from_report(report, SNAPSHOT.source)


def label(judges: tuple[str, ...]) -> str:
    """`κ 0.678`, or `κ 0.593 < 0.6` when under the bar; several judges are named:
    `κ accuracy 0.593 < 0.6, included 0.514 < 0.6`."""
    ks = agreement().kappa
    parts = []
    for name in judges:
        k = ks.get(name)
        text = "–" if k is None else f"{k:.3f}" + (f" < {BAR}" if k < BAR else "")
        parts.append(f"{name} {text}" if len(judges) > 1 else text)
    return "κ " + ", ".join(parts)


def note() -> str:
    """What the κ beside a judged figure is, said once per page."""
    a = agreement()
    when = (
        "measured with the judges as they are"
        if a.own_rules
        else "last measured before the judges dropped the product's rules, so to be "
        "measured again (docs/judges.md explains)"
    )
    return (
        f"κ beside a judged figure: Cohen's κ of its judge against the hand labels "
        f"(test half, {a.mode} judges, {a.model}; {a.source}), {when}. "
        f"< {BAR}: under the bar a judge is trusted at; compare systems within one run "
        "on such a figure, not its level."
    )
