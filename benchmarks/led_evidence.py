"""How many of the best facts should lead the answerer to their turns? Evidence by count.

`deltamem`'s answerer reads the 20 raw turns `retrieval` reads and, beside them, the
turns the best facts were written from (`ManagerConfig.beside_facts`; by default half
the turns read, 10). A fact's turn is often among the raw 20 already, and most of the
others are not evidence: each is one more excerpt the small answerer must read past.
This script asks, for finished LoCoMo runs with their banks (`OUT/systems/deltamem`),
what `Memory.context` reads with each number of leading facts: the evidence recall of
categories 1-4 and how many items a question reads, against the default question by
question (a 95% paired bootstrap interval, as `deltamem bench compare` gives). No model
is called; each bank is read from a copy.

    python benchmarks/led_evidence.py runs/lc26-s10 runs/lc30-s10 \
        --data ../shared/data/locomo/locomo10-dev.json --facts 0,1,2,3,5,10
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.datasets import locomo as lc
from deltamem.bench.locomo import reached_turns
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.metrics.locomo import HEADLINE_CATEGORIES, evidence_recall
from deltamem.bench.paired import bootstrap_interval
from deltamem.bench.systems.base import Retrieved
from deltamem.embed import Embedder, make_embedder
from deltamem.memory import Memory

SYSTEM = "deltamem"
LIMIT = 20  # the raw turns a question reads, as the bench asks (--limit)


def turn_ids(run: Path, convs: dict[str, lc.LocomoConversation]) -> dict[str, dict[str, list[str]]]:
    """Each user's dia_ids by session id, for the sessions the run wrote."""
    added: dict[str, int] = defaultdict(int)
    for r in read_records(run / RESULTS):
        if r.get("kind") == "session" and r.get("system") == SYSTEM:
            added[r["user"]] = max(added[r["user"]], int(r["session"]))
    out: dict[str, dict[str, list[str]]] = {}
    for user, n in added.items():
        conv = convs[user]
        benches = [lc.to_bench_session(conv, s, both_as_user=True) for s in conv.sessions[:n]]
        out[user] = {b.session_id: list(b.turn_ids) for b in benches}
    return out


def measure(
    run: Path,
    convs: dict[str, lc.LocomoConversation],
    counts: list[int],
    embedder: Embedder,
    limit: int = LIMIT,
) -> dict[int, list[tuple[float, int]]]:
    """(evidence recall, items read) of each question, for each count of leading facts."""
    ids = turn_ids(run, convs)
    out: dict[int, list[tuple[float, int]]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        bank = Path(tmp) / "bank"
        shutil.copytree(run / "systems" / SYSTEM, bank)
        mem = Memory(bank / "deltamem.db", embedder=embedder, log_calls=False)
        try:
            base = mem.config
            for r in read_records(run / RESULTS):
                if not (r.get("kind") == "question" and r.get("system") == SYSTEM):
                    continue
                if r.get("category") not in HEADLINE_CATEGORIES or not r.get("evidence"):
                    continue
                for n in counts:
                    mem.config = dataclasses.replace(base, beside_facts=n)
                    hits = mem.context(r["question"], user_id=r["user"], limit=limit)
                    found = [Retrieved.from_hit(h) for h in hits]
                    got = evidence_recall(r["evidence"], reached_turns(found, ids[r["user"]]))
                    out[n].append((float(got or 0.0), len(hits)))
        finally:
            mem.close()
    return out


def table(by_run: dict[str, dict[int, list[tuple[float, int]]]], counts: list[int],
          default: int) -> list[str]:  # fmt: skip
    lines = [
        "| runs | facts leading | questions | evidence recall | items read | "
        f"− {default} facts (95% interval) |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[str, dict[int, list[tuple[float, int]]]] = dict(by_run)
    if len(by_run) > 1:
        groups["pooled"] = {n: [x for run in by_run.values() for x in run[n]] for n in counts}
    for name, res in groups.items():
        ref = np.array([e for e, _ in res[default]])
        for n in counts:
            ev = np.array([e for e, _ in res[n]])
            read = np.mean([k for _, k in res[n]]) if res[n] else float("nan")
            diff = ""
            if n != default and len(ev):
                low, high = bootstrap_interval(ref, ev)
                diff = f"{ev.mean() - ref.mean():+.3f} ({low:+.3f} … {high:+.3f})"
            lines.append(f"| {name} | {n} | {len(ev)} | {ev.mean():.3f} | {read:.1f} | {diff} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True, type=Path, action="append")
    ap.add_argument("--facts", default="0,1,2,3,5,10", help="counts of leading facts")
    ap.add_argument("--limit", type=int, default=LIMIT, help="raw turns a question reads")
    ap.add_argument("--default", type=int, help="the count compared with (default: limit // 2)")
    args = ap.parse_args()
    if args.default is None:
        args.default = args.limit // 2
    counts = sorted({int(c) for c in args.facts.split(",") if c.strip()} | {args.default})
    convs = {c.sample_id: c for path in args.data for c in lc.load(path)}
    embedder = make_embedder()
    by_run: dict[str, Any] = {}
    for run in args.runs:
        if not (run / "systems" / SYSTEM / "deltamem.db").is_file():
            raise SystemExit(f"{run}: no bank at {run / 'systems' / SYSTEM / 'deltamem.db'}")
        by_run[run.name] = measure(run, convs, counts, embedder, args.limit)
    print("\n".join(table(by_run, counts, args.default)))


if __name__ == "__main__":
    main()
