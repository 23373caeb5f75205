"""What writing memory costs: LLM calls, tokens read, seconds, per session.

    python benchmarks/write_cost.py --data ../shared/data/halumem/pilot_slice_user3.jsonl \
        --sessions 10 --json

Ingests the first N sessions of the first user in a HaluMem JSONL file with the
embedded model (or --llm SPEC) into a fresh store and prints:
  llm_calls_per_session, prompt_tokens_per_session (every prompt token the LLM was
  given, KV-cache hits included), evaluated_prompt_tokens_per_session (those it
  actually computed), session_tokens_per_session (the raw session, all turns, in
  the model's tokens), write_amplification = prompt tokens / session tokens,
  qpm = search-tool queries per stored memory, seconds_per_session, memories.
Each session's result is appended to a JSONL cache, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.progress import Progress

from deltamem import ManagerConfig, Memory
from deltamem.bench.datasets.halumem import iter_users, to_bench_session


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--llm", default=None)
    ap.add_argument("--search-rounds", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path(".cache/write_cost"))
    ap.add_argument("--fresh", action="store_true", help="ignore results of an earlier run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    user = next(iter_users(args.data))
    sessions = [
        to_bench_session(s, i, user.name) for i, s in enumerate(user.sessions) if s.evaluated
    ][: args.sessions]
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"{args.data.stem}-{args.sessions}.jsonl"
    db = args.out / f"{args.data.stem}-{args.sessions}.db"
    if args.fresh:
        log.unlink(missing_ok=True)
        db.unlink(missing_ok=True)
    done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    config = ManagerConfig()
    if args.search_rounds is not None:
        config.search_rounds = args.search_rounds
    mem = Memory(db, llm=args.llm, config=config)
    with Progress(disable=args.json, transient=True) as progress:
        task = progress.add_task("sessions", total=len(sessions), completed=len(done))
        for i, s in enumerate(sessions[len(done) :], start=len(done)):
            t = time.perf_counter()
            res = mem.add(
                s.messages, user_id="bench", session_id=s.session_id, timestamp=s.timestamp
            )
            row = {"session": i, "seconds": time.perf_counter() - t, **res.cost}
            row["stored"] = len(res.applied)
            with log.open("a") as f:
                f.write(json.dumps(row) + "\n")
            done.append(row)
            progress.advance(task)

    n = len(done)
    total = {k: sum(r.get(k, 0) for r in done) for k in done[0]} if done else {}
    memories = mem.store.count("bench")
    result = {
        "sessions": n,
        "llm_calls_per_session": round(total["llm_calls"] / n, 3),
        "prompt_tokens_per_session": round(total["prompt_tokens"] / n, 1),
        "evaluated_prompt_tokens_per_session": round(
            (total["prompt_tokens"] - total["cached_tokens"]) / n, 1
        ),
        "completion_tokens_per_session": round(total["completion_tokens"] / n, 1),
        "session_tokens_per_session": round(total["session_tokens"] / n, 1),
        "write_amplification": round(total["prompt_tokens"] / total["session_tokens"], 3),
        "qpm": round(total["search_queries"] / max(1, memories), 3),
        "seconds_per_session": round(total["seconds"] / n, 1),
        "memories": memories,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    mem.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
