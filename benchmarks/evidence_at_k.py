"""Is `deltamem`'s higher LoCoMo evidence recall more than more turns? A control.

`deltamem`'s answerer reads the 20 raw turns `retrieval` reads and, beside them, the
turns the best facts were written from (up to 10 more). This script asks what raw
search alone reaches with as many turns: for each category 1-4 question of finished
LoCoMo runs it ranks the conversation's turns (of the sessions the run added) by
embedding cosine, as `retrieval` does, and takes the first k, for each k given and for
k = the number of turns `deltamem` read for that question; then
it pairs each k's evidence recall with the one `deltamem` logged, question by
question (a 95% paired bootstrap interval, as `deltamem bench compare` gives). No
model is called; the embedder is the bench's.

    python benchmarks/evidence_at_k.py runs/ctx/lc41-turns runs/ctx/lc42-turns \
        --data ../shared/data/locomo/locomo10-dev-more.json --k 20,25,30
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.datasets import locomo as ds
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.metrics.locomo import HEADLINE_CATEGORIES, evidence_recall
from deltamem.bench.paired import bootstrap_interval
from deltamem.embed import make_embedder


def questions(run: Path, system: str) -> list[dict[str, Any]]:
    """The run's answered-or-searched questions of categories 1-4 for `system`."""
    return [
        r
        for r in read_records(run / RESULTS)
        if r.get("kind") == "question"
        and r.get("system") == system
        and r.get("category") in HEADLINE_CATEGORIES
        and r.get("evidence")
        and r.get("evidence_recall") is not None
    ]


def sessions_added(run: Path, system: str, user: str) -> int:
    return max(
        r["session"]
        for r in read_records(run / RESULTS)
        if r.get("kind") == "session" and r.get("system") == system and r.get("user") == user
    )


def ranked_turns(
    conv: ds.LocomoConversation, n_sessions: int, embedder: Any
) -> tuple[list[str], np.ndarray]:
    """The conversation's turn ids and their vectors, as `retrieval` stores them."""
    ids: list[str] = []
    texts: list[str] = []
    for s in conv.sessions[:n_sessions]:
        bench = ds.to_bench_session(conv, s, both_as_user=True)
        for m, dia in zip(bench.messages, bench.turn_ids, strict=True):
            ids.append(dia)
            texts.append(f"{m.get('name') or m['role']}: {m['content']}")
    return ids, np.asarray(embedder.embed(texts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True, type=Path, action="append")
    ap.add_argument("--k", default="20,25,30")
    ap.add_argument("--system", default="deltamem")
    args = ap.parse_args()
    ks = [int(x) for x in args.k.split(",")]
    convs = {c.sample_id: c for path in args.data for c in ds.load(path)}
    embedder = make_embedder()

    logged: list[float] = []
    reached_n: list[int] = []
    at_k: dict[int, list[float]] = defaultdict(list)
    matched: list[float] = []  # raw search given as many turns as `system` read
    for run in args.runs:
        rows = questions(run, args.system)
        by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by_user[r["user"]].append(r)
        for user, qs in by_user.items():
            ids, vectors = ranked_turns(
                convs[user], sessions_added(run, args.system, user), embedder
            )
            for r in qs:
                sims = vectors @ np.asarray(embedder.embed_one(r["question"]))
                order = np.argsort(-sims, kind="stable")
                logged.append(float(r["evidence_recall"]))
                reached_n.append(len(r.get("reached") or []))
                top = [ids[i] for i in order[: reached_n[-1]]]
                matched.append(float(evidence_recall(r["evidence"], top) or 0.0))
                for k in ks:
                    top = [ids[i] for i in order[:k]]
                    at_k[k].append(float(evidence_recall(r["evidence"], top) or 0.0))

    b = np.asarray(logged)
    print(
        f"{len(b)} questions; `{args.system}` read {np.mean(reached_n):.1f} turns a question "
        f"(most {max(reached_n)}); its evidence recall {b.mean():.3f}"
    )
    print(
        f"| raw turns ranked by cosine, k | evidence recall | {args.system} − it | 95% interval |"
    )
    print("|---|---|---|---|")
    for k in ks:
        a = np.asarray(at_k[k])
        low, high = bootstrap_interval(a, b)
        print(f"| {k} | {a.mean():.3f} | {b.mean() - a.mean():+.3f} | {low:+.3f} … {high:+.3f} |")
    a = np.asarray(matched)
    low, high = bootstrap_interval(a, b)
    print(
        f"| as many as `{args.system}` read | {a.mean():.3f} | {b.mean() - a.mean():+.3f} | "
        f"{low:+.3f} … {high:+.3f} |"
    )


if __name__ == "__main__":
    main()
