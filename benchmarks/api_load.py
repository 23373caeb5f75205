"""Load on the REST API over loopback: session submission and search under N clients.

    python benchmarks/api_load.py --backend sqlite --clients 1,8,32 --seconds 20 --json
    python benchmarks/api_load.py --backend postgres --clients 1,8,32 --seconds 20 --json

Starts ``deltamem --db ... --llm tiny serve`` as a subprocess on 127.0.0.1 on a free
port (sqlite: a temp file; postgres: a throwaway PostgreSQL from the `pgserver`
wheel, started and stopped here), so the worker does real (cheap) LLM work while
the load runs. Before the server starts, a bank is written straight through the
store: `--users` users with `--memories-per-user` memories each (real embeddings).
Then, for each client count, that many httpx async clients run for `--seconds`,
each looping over a random mix of ``POST /v1/sessions`` (a new session of a random
user; answered 202 once logged) and ``POST /v1/search`` (a random user and query).
Prints per-endpoint p50/p99 latency (ms), throughput (requests/s) and error
counts as JSON:

    {"backend": "sqlite", "clients": {"1": {"submit": {"p50_ms", "p99_ms", "rps",
     "n", "errors"}, "search": {...}}, ...}, ...}

Everything started here (the server, PostgreSQL) is stopped on exit, Ctrl-C and
SIGTERM included. Only 127.0.0.1 is contacted. The clients share the machine
with the server: on a small machine their own CPU use is part of the latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from search_latency import OBJECTS, SUBJECTS, VERBS  # one synthetic vocabulary

API_KEY = "api-load-key-0123456789abcdef"
TENANT = "bench"
HEADERS = {"X-API-Key": API_KEY}
QUERIES = [
    "What films does the user like?",
    "Where did they travel?",
    "Which food do they avoid?",
    "What are they studying?",
    "Who did they meet?",
    "What did they buy recently?",
    "Do they run marathons?",
    "What drink do they prefer?",
]


def sentence(rng: random.Random, i: int) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (note {i})."


# --- what this script starts, and stops -------------------------------------------------------
class PgServer:
    """A throwaway PostgreSQL with pgvector (as in tests/pg.py)."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
            from pgserver._commands import POSTGRES_BIN_PATH

        self.bin = Path(POSTGRES_BIN_PATH)
        self.root = Path(tempfile.mkdtemp(prefix="deltamem-load-pg-"))
        self.datadir = self.root / "data"
        self.stopped = False
        try:
            srv = pgserver.get_server(self.datadir, cleanup_mode=None)
            self.uri = srv.get_uri()
            import psycopg

            with psycopg.connect(self.uri, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        cmd = [str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # pgserver runs it as `pgserver`
            cmd = ["runuser", "-u", "pgserver", "--", *cmd]
        if (self.datadir / "postmaster.pid").exists():
            subprocess.run(cmd, check=False, capture_output=True, timeout=60)
        subprocess.run(["rm", "-rf", str(self.root)], check=False, timeout=120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServer:
    def __init__(self, db: str, llm: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "deltamem", "--db", db, "--llm", llm, "serve"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--keys", f"{API_KEY}={TENANT}"]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}); see {self.log.name}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"server not ready within {timeout:g}s; see {self.log.name}")

    def health(self) -> dict[str, Any]:
        try:
            return httpx.get(self.url + "/healthz", timeout=5.0).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s (the worker may be inside an LLM call)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


# --- the bank ------------------------------------------------------------------------------
def preload(db: str, users: int, per_user: int, seed: int) -> None:
    """Write `per_user` memories for each user straight through the store."""
    from deltamem.embed import make_embedder
    from deltamem.memory import open_store
    from deltamem.store.base import PlannedWrite
    from deltamem.text import keywords
    from deltamem.types import Message, SessionRecord

    rng = random.Random(seed)
    embedder = make_embedder("local")
    store = open_store(db, embedder)
    try:
        for u in range(users):
            texts = [sentence(rng, i) for i in range(per_user)]
            vecs = embedder.embed(texts)
            writes = [
                PlannedWrite("add", t, v, keywords=keywords(t), memory_type="event")
                for t, v in zip(texts, vecs, strict=True)
            ]
            rec = SessionRecord(
                user_id=f"{TENANT}:user{u}",
                session_id="preload",
                timestamp="2029-01-01T00:00:00",
                messages=[Message(role="user", content="preload")],
                content_hash=f"preload-{u}",
            )
            stored, _ = store.log_session(rec)
            store.apply_session(stored, writes, [])
    finally:
        store.close()


# --- the load --------------------------------------------------------------------------------
@dataclass
class Samples:
    ms: list[float] = field(default_factory=list)
    errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)

    def summary(self, seconds: float) -> dict[str, Any]:
        xs = sorted(self.ms)
        n = len(xs)

        def pct(p: float) -> float | None:
            return round(xs[min(n - 1, int(p * n))], 2) if n else None

        return {
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "rps": round(n / seconds, 1) if seconds > 0 else None,
            "n": n,
            "errors": self.errors,
            **({"error_statuses": self.statuses} if self.statuses else {}),
        }


async def load(
    url: str,
    clients: int,
    seconds: float,
    users: int,
    submit_share: float,
    seed: int,
    rate: float = 0.0,
) -> dict[str, Any]:
    """Closed loop (`rate` 0): each client sends its next request as soon as the last
    one is answered, so latency at many clients is mostly queueing and the figure
    that matters is throughput. Paced (`rate` > 0): each client starts a request
    every 1/rate s; latency is counted from the scheduled start, so a server that
    falls behind is charged for the wait (no coordinated omission)."""
    stats = {"submit": Samples(), "search": Samples()}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    timeout = httpx.Timeout(30.0)
    async with httpx.AsyncClient(
        base_url=url, headers=HEADERS, limits=limits, timeout=timeout
    ) as client:
        # warm up: one of each, not counted
        await client.post("/v1/search", json={"query": QUERIES[0], "user_id": "user0"})
        deadline = time.perf_counter() + seconds

        async def one(c: int) -> None:
            rng = random.Random(seed * 1000 + c)
            i = 0
            start = time.perf_counter() + (rng.random() / rate if rate > 0 else 0.0)
            while time.perf_counter() < deadline:
                i += 1
                due = start + (i - 1) / rate if rate > 0 else None
                if due is not None:
                    if due >= deadline:
                        break
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                user = f"user{rng.randrange(users)}"
                if rng.random() < submit_share:
                    kind = "submit"
                    body: dict[str, Any] = {
                        "user_id": user,
                        "session_id": f"load-{c}-{i}-{uuid.uuid4().hex[:8]}",
                        "timestamp": "2029-03-01T10:00:00",
                        "messages": [
                            {"role": "user", "content": f"By the way, {sentence(rng, i)}"},
                            {"role": "assistant", "content": "Good to know."},
                        ],
                    }
                    path, ok = "/v1/sessions", 202
                else:
                    kind = "search"
                    body = {"query": rng.choice(QUERIES), "user_id": user, "limit": 10}
                    path, ok = "/v1/search", 200
                t = due if due is not None else time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                    status = str(r.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                ms = (time.perf_counter() - t) * 1000
                s = stats[kind]
                if status == str(ok):
                    s.ms.append(ms)
                else:
                    s.errors += 1
                    s.statuses[status] = s.statuses.get(status, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(one(c) for c in range(clients)))
        elapsed = time.perf_counter() - t0
    return {k: v.summary(elapsed) for k, v in stats.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--clients", default="1,8,32", help="comma-separated client counts")
    ap.add_argument("--seconds", type=float, default=20.0, help="per client count")
    ap.add_argument("--llm", default="tiny", help="the server's --llm (default: tiny)")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--memories-per-user", type=int, default=50)
    ap.add_argument("--submit-share", type=float, default=0.5, help="share of submissions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests/s per client (paced, open loop); 0: closed loop, as fast as answered",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",") if c.strip()]
    if not counts or min(counts) < 1 or args.seconds <= 0 or args.rate < 0:
        ap.error("--clients must be positive integers, --seconds > 0 and --rate >= 0")

    def on_term(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    tmp = Path(tempfile.mkdtemp(prefix="deltamem-load-"))
    pg: PgServer | None = None
    api: ApiServer | None = None
    result: dict[str, Any] = {
        "backend": args.backend,
        "llm": args.llm,
        "mode": f"paced, {args.rate:g} requests/s per client" if args.rate else "closed loop",
        "clients": {},
    }
    code = 0
    try:
        if args.backend == "postgres":
            pg = PgServer()
            db = pg.uri
        else:
            db = str(tmp / "load.db")
        t = time.perf_counter()
        preload(db, args.users, args.memories_per_user, args.seed)
        result["preload"] = {
            "users": args.users,
            "memories": args.users * args.memories_per_user,
            "seconds": round(time.perf_counter() - t, 1),
        }
        api = ApiServer(db, args.llm, tmp / "server.log")
        api.wait_ready()
        for c in counts:
            result["clients"][str(c)] = asyncio.run(
                load(api.url, c, args.seconds, args.users, args.submit_share, args.seed, args.rate)
            )
            if not args.json:
                print(c, result["clients"][str(c)], file=sys.stderr, flush=True)
        result["worker_after"] = api.health().get("worker")
    except KeyboardInterrupt:
        print("interrupted; stopping what was started", file=sys.stderr)
        result["interrupted"] = True
        code = 130
    finally:
        if api is not None:
            api.stop()
        if pg is not None:
            pg.stop()
        subprocess.run(["rm", "-rf", str(tmp)], check=False, timeout=60)
    print(json.dumps(result, indent=None if args.json else 2))
    sys.exit(code)


if __name__ == "__main__":
    main()
