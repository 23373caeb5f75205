"""A finished HaluMem run's memory-state distance computed again, into a new directory.

The state distance (deltamem/train/distance.py) is computed while a run writes, and
each evaluated session's record keeps it (`state`) beside the memories and the gold
points it was computed from. When the distance itself changes (a fix, another `tau`),
the runs written before need not be written again: `rescore_states` copies a run's
records and computes every session's state again from what was logged. No model is
called and no memory system is opened; the verdicts of the judges are carried over,
as the memories they judged did not change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from deltamem.bench.halumem import session_state
from deltamem.bench.judges.base import CACHE
from deltamem.bench.log import JUDGMENTS, RESULTS, read_records
from deltamem.embed import Embedder
from deltamem.train.distance import DEFAULT_TAU


def rescore_states(
    source: Path, out: Path, embedder: Embedder, tau: float = DEFAULT_TAU
) -> tuple[int, int]:
    """Copy `source`'s records into `out`, each evaluated session's `state` computed
    again; returns (sessions scored, sessions whose state_f1 moved). `out` must not
    hold records yet, and nothing is written where no session logged what its state
    is computed from (ValueError)."""
    if (out / RESULTS).exists():
        raise FileExistsError(f"{out / RESULTS} exists: rescore into a new directory")
    records = list(read_records(source / RESULTS))
    sessions = [
        r for r in records if r.get("kind") == "session" and "gold" in r and "memories" in r
    ]
    if not sessions:
        raise ValueError(f"{source}: no session logged its memories and gold points")
    moved = 0
    for rec in sessions:
        old = (rec.get("state") or {}).get("r_trans")
        rec["state"] = session_state(rec["memories"], rec["gold"], embedder, tau)
        moved += old is None or abs(float(old) - rec["state"]["r_trans"]) > 1e-9
    out.mkdir(parents=True, exist_ok=True)
    with (out / RESULTS).open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)
    for name in (JUDGMENTS, CACHE):
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)
    return len(sessions), moved
