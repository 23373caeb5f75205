"""Is `deltamem`'s higher evidence figure more than more turns read? A control.

`deltamem`'s answerer reads the 20 raw turns `retrieval` reads and, beside them, the
turns the best facts were written from (up to 10 more). This script asks what raw
search alone reaches with as many turns. For each question of finished runs it ranks
the turns `retrieval` held when the question was asked by embedding cosine, as
`retrieval` does, and takes the first k, for each k given and for k = the number of
items `deltamem` read for that question; it pairs each with the figure `deltamem`
logged, question by question (a 95% paired bootstrap interval, as `deltamem bench
compare` gives). No model is called; the embedder is the bench's.

- LoCoMo runs (`--data` a LoCoMo JSON): evidence recall of categories 1-4, the
  share of the evidence turns (dia_id) among those read.
- HaluMem runs (`--data` a HaluMem JSONL): evidence coverage, the share of the gold
  evidence's content words found in the text read (more text finds more words).

    python benchmarks/evidence_at_k.py runs/ctx/lc41-turns runs/ctx/lc42-turns \
        --data ../shared/data/locomo/locomo10-dev-more.json --k 20,25,30
    python benchmarks/evidence_at_k.py runs/hm3-all-ans \
        --data ../shared/data/halumem/pilot_slice_user3.jsonl --k 20,25,30
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.datasets import halumem as hm
from deltamem.bench.datasets import locomo as lc
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.metrics.coverage import evidence_coverage
from deltamem.bench.metrics.locomo import HEADLINE_CATEGORIES, evidence_recall
from deltamem.bench.paired import bootstrap_interval
from deltamem.bench.systems.turns import StoredTurn
from deltamem.embed import Embedder, make_embedder

Record = dict[str, Any]


@dataclass
class Asked:
    """One question: what `deltamem` logged, and the raw turns to rank for it."""

    record: Record
    figure: float  # deltamem's logged evidence figure
    read: int  # how many items deltamem's answerer read
    turns: list[str]  # the texts `retrieval` held (its ranking's input)
    score: Callable[[list[int]], float]  # the figure of the turns at these positions


def _turn_text(m: dict[str, Any]) -> str:
    """The text `retrieval` stores and ranks for a message."""
    who = m.get("name") or m.get("role", "user")
    return StoredTurn(who, str(m.get("content", "")).strip(), None, "", 0).text


def _questions(run: Path, system: str) -> Iterator[Record]:
    for r in read_records(run / RESULTS):
        if r.get("kind") == "question" and r.get("system") == system:
            yield r


def locomo(runs: list[Path], data: list[Path], system: str) -> Iterator[Asked]:
    convs = {c.sample_id: c for path in data for c in lc.load(path)}
    for run in runs:
        added: dict[str, int] = defaultdict(int)
        for r in read_records(run / RESULTS):
            if r.get("kind") == "session" and r.get("system") == system:
                added[r["user"]] = max(added[r["user"]], r["session"])
        for r in _questions(run, system):
            if r.get("category") not in HEADLINE_CATEGORIES or not r.get("evidence"):
                continue
            ids: list[str] = []
            texts: list[str] = []
            for s in convs[r["user"]].sessions[: added[r["user"]]]:
                bench = lc.to_bench_session(convs[r["user"]], s, both_as_user=True)
                ids.extend(bench.turn_ids)
                texts.extend(_turn_text(m) for m in bench.messages)
            evidence = r["evidence"]

            def score(picks: list[int], ids: list[str] = ids, ev: list[str] = evidence) -> float:
                return float(evidence_recall(ev, [ids[i] for i in picks]) or 0.0)

            yield Asked(r, float(r["evidence_recall"]), len(r.get("reached") or []), texts, score)


def halumem(runs: list[Path], data: list[Path], system: str) -> Iterator[Asked]:
    users = {u.uuid: u for path in data for u in hm.iter_users(path)}
    for run in runs:
        for r in _questions(run, system):
            if r.get("evidence_coverage") is None:
                continue
            user = users[r["user"]]
            texts = [
                _turn_text(m)
                for i, s in enumerate(user.sessions[: r["session"] + 1])
                for m in hm.to_bench_session(s, i, user.name).messages
            ]
            evidence, name = r["evidence"], user.name

            def score(picks: list[int], texts: list[str] = texts, ev: list[str] = evidence,
                      name: str | None = name) -> float:  # fmt: skip
                return float(evidence_coverage(ev, [texts[i] for i in picks], name) or 0.0)

            yield Asked(r, float(r["evidence_coverage"]), len(r.get("hits") or []), texts, score)


def control(asked: Iterator[Asked], ks: list[int], embedder: Embedder) -> dict[str, Any]:
    logged: list[float] = []
    read: list[int] = []
    at_k: dict[str, list[float]] = defaultdict(list)
    vectors: dict[str, np.ndarray] = {}  # each turn embedded once, whichever question
    for a in asked:
        new = list(dict.fromkeys(t for t in a.turns if t not in vectors))
        if new:
            vectors.update(zip(new, np.asarray(embedder.embed(new)), strict=True))
        matrix = np.stack([vectors[t] for t in a.turns])
        sims = matrix @ np.asarray(embedder.embed_one(a.record["question"]))
        order = [int(i) for i in np.argsort(-sims, kind="stable")]
        logged.append(a.figure)
        read.append(a.read)
        for k in ks:
            at_k[str(k)].append(a.score(order[:k]))
        at_k["matched"].append(a.score(order[: a.read]))
    return {"logged": np.asarray(logged), "read": read, "at_k": at_k}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True, type=Path, action="append")
    ap.add_argument("--k", default="20,25,30")
    ap.add_argument("--system", default="deltamem")
    args = ap.parse_args()
    ks = [int(x) for x in args.k.split(",")]
    is_halumem = args.data[0].suffix == ".jsonl"
    asked = (halumem if is_halumem else locomo)(args.runs, args.data, args.system)
    figure = "evidence coverage" if is_halumem else "evidence recall"
    got = control(asked, ks, make_embedder())

    b, read = got["logged"], got["read"]
    print(
        f"{len(b)} questions; `{args.system}` read {np.mean(read):.1f} items a question "
        f"(most {max(read)}); its {figure} {b.mean():.3f}"
    )
    print(f"| raw turns ranked by cosine, k | {figure} | {args.system} − it | 95% interval |")
    print("|---|---|---|---|")
    for k, values in got["at_k"].items():
        a = np.asarray(values)
        low, high = bootstrap_interval(a, b)
        label = f"as many as `{args.system}` read" if k == "matched" else k
        print(
            f"| {label} | {a.mean():.3f} | {b.mean() - a.mean():+.3f} | {low:+.3f} … {high:+.3f} |"
        )


if __name__ == "__main__":
    main()
