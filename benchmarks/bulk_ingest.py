"""Bulk ingestion speed: `deltamem import-sessions` end to end, in sessions a minute.

    python benchmarks/bulk_ingest.py --sessions 3000 --turns 4 --json
    python benchmarks/bulk_ingest.py --sessions 3000 --backend postgres --json
    python benchmarks/bulk_ingest.py --sessions 3000 --infer --json   # queue for workers

Writes a JSONL file of `--sessions` synthetic sessions (`--turns` turns each,
spread over `--users` users, each line naming its user), then times
``python -m deltamem --db DB import-sessions FILE --no-infer --json`` (or
``--infer``: the sessions are queued for the workers, not processed) as a
subprocess: process start, loading the embedder, validating each line, embedding
every turn (the episode tier) and one transaction per session. No model is called.
Then runs it again with ``--resume`` (everything skipped) and checks the log holds
every session once. The database is a temp SQLite file, or with ``--backend
postgres`` a throwaway PostgreSQL from the `pgserver` wheel (started and stopped
here). Prints JSON figures: seconds, sessions a minute, turns a second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from search_latency import OBJECTS, SUBJECTS, VERBS  # one synthetic vocabulary


def write_sessions(path: Path, n: int, turns: int, users: int, seed: int) -> int:
    """The JSONL file; returns the number of turns written."""
    rng = random.Random(seed)
    start = datetime(2029, 1, 1, tzinfo=UTC)
    written = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            messages = []
            for t in range(turns):
                if t % 2 == 0:
                    text = (
                        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                        f"last week, and I keep thinking about it (note {i}.{t})."
                    )
                    messages.append({"role": "user", "content": text})
                else:
                    text = (
                        f"That sounds like a lot. How did {rng.choice(SUBJECTS)} take it, and "
                        f"what about {rng.choice(OBJECTS)} (reply {i}.{t})?"
                    )
                    messages.append({"role": "assistant", "content": text})
            line = {
                "user_id": f"user{i % users}",
                "session_id": f"s{i}",
                "timestamp": (start + timedelta(hours=i)).isoformat(),
                "messages": messages,
            }
            f.write(json.dumps(line) + "\n")
            written += turns
    return written


def run_import(db: str, path: Path, infer: bool, resume: bool = False) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "deltamem", "--db", db, "import-sessions", str(path), "--json"]
    cmd += ["--infer" if infer else "--no-infer"] + (["--resume"] if resume else [])
    env = {**os.environ, "DELTAMEM_LLM": "tiny"}  # never loaded: no model call here
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"import-sessions exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def count_logged(db: str) -> int:
    from deltamem.embed import make_embedder
    from deltamem.memory import open_store

    store = open_store(db, make_embedder("local"))
    try:
        return len(store.list_sessions())
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=3000)
    ap.add_argument("--turns", type=int, default=4, help="turns per session")
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--infer", action="store_true", help="queue for the workers (pending)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    pg: Any = None
    with tempfile.TemporaryDirectory(prefix="deltamem-bulk-") as tmp:
        path = Path(tmp) / "sessions.jsonl"
        turns = write_sessions(path, args.sessions, args.turns, args.users, args.seed)
        if args.backend == "postgres":
            from api_load import PgServer

            pg = PgServer()
            db = pg.uri
        else:
            db = str(Path(tmp) / "bulk.db")
        try:
            seconds, first = run_import(db, path, args.infer)
            again_s, again = run_import(db, path, args.infer, resume=True)
            logged = count_logged(db)
        finally:
            if pg is not None:
                pg.stop()
    out = {
        "command": f"python benchmarks/bulk_ingest.py {' '.join(sys.argv[1:])}".strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "backend": args.backend,
        "status": "pending" if args.infer else "deferred",
        "sessions": args.sessions,
        "turns": turns,
        "seconds": round(seconds, 2),
        "sessions_per_minute": round(args.sessions / seconds * 60),
        "turns_per_second": round(turns / seconds, 1),
        "first_run": first,
        "resume_seconds": round(again_s, 2),
        "resume_run": again,
        "logged_once": logged == args.sessions,
    }
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
