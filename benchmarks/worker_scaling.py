"""Worker scaling: sessions applied a second by 1, 2 and 4 `deltamem worker` processes
sharing one PostgreSQL.

    python benchmarks/worker_scaling.py --workers 1,2,4 --sessions 600 --seconds 40 --json

Starts a throwaway PostgreSQL (the `pgserver` wheel) and the scripted
OpenAI-compatible model of the crash drill (`crash_trials.FakeLLM`: each call sleeps
a random `--llm-delay` first, then adds the facts the session names), logs
`--sessions` sessions of `--users` users into a template database with
`Memory.add_many(infer=True)` (queued, nothing applied), and then, per worker count
K, copies the template into a fresh database and starts K ``python -m deltamem --db
URL --llm FAKE worker --concurrency C`` processes (the "session" manager strategy,
the scripted model's). It counts the applied sessions every half second until all
are applied or `--seconds` have passed (at most 60), then stops the workers. The
rate is taken from the first applied session on (process start and loading the
embedder left out). The CPU seconds of the workers and of PostgreSQL over the same window (from
/proc) give the CPU a session costs; with the cores' count they say where adding
workers stops paying.
Everything started here is stopped on exit. Prints JSON figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api_load import PgServer
from crash_trials import FACT_SPACE, FakeLLM

MAX_SECONDS = 60.0


def sessions(n: int, users: int) -> list[dict[str, Any]]:
    """Session i of user i % users names fact#i: the scripted model adds that fact."""
    return [
        {
            "user_id": f"user{i % users}",
            "session_id": f"s{i}",
            "timestamp": f"2029-01-01T00:00:{i % 60:02d}",
            "messages": [
                {"role": "user", "content": f"Please remember fact#{i % FACT_SPACE} for me."},
                {"role": "assistant", "content": "Noted."},
            ],
        }
        for i in range(n)
    ]


def dsn(uri: str, dbname: str) -> str:
    """The URL `uri` with another database (a postgresql:// URL, as `--db` takes)."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(uri)._replace(path="/" + dbname))


def counts(url: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status='applied'), count(*) FROM sessions"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pg_cpu_seconds(datadir: Path) -> float:
    """CPU seconds of the PostgreSQL server: its postmaster and every backend now."""
    try:
        postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = cpu_seconds(postmaster)
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == postmaster:
                total += cpu_seconds(int(proc.name))
    return total


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def run_config(
    url: str, k: int, llm: str, concurrency: int, seconds: float, logs: Path, datadir: Path
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DELTAMEM_MANAGER": "session"}
    cmd = [sys.executable, "-m", "deltamem", "--db", url, "--llm", llm, "worker"]
    cmd += ["--concurrency", str(concurrency)]
    procs: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    first: tuple[float, int] | None = None
    last = (started, 0)
    cpu = {"workers": 0.0, "postgres": 0.0}  # from the first applied session on
    try:
        for i in range(k):
            log = (logs / f"worker{k}-{i}.log").open("ab")
            procs.append(
                subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            )
        total = counts(url)[1]
        while time.monotonic() - started < seconds:
            time.sleep(0.5)
            applied, _ = counts(url)
            now = time.monotonic()
            if first is None and applied > 0:
                first = (now, applied)
                cpu["workers"] -= sum(cpu_seconds(p.pid) for p in procs)
                cpu["postgres"] -= pg_cpu_seconds(datadir)
            last = (now, applied)
            if applied >= total or any(p.poll() is not None for p in procs):
                break
        if first is not None:
            cpu["workers"] += sum(cpu_seconds(p.pid) for p in procs)
            cpu["postgres"] += pg_cpu_seconds(datadir)
    finally:
        stop(procs)
    applied = last[1]
    window = last[0] - first[0] if first else 0.0
    done = applied - first[1] if first else 0
    rate = done / window if window > 0 else 0.0
    return {
        "workers": k,
        "threads": k * concurrency,
        "applied": applied,
        "of": total,
        "seconds": round(last[0] - started, 1),
        "first_applied_after_s": round(first[0] - started, 1) if first else None,
        "sessions_per_second": round(rate, 2),
        # CPU a session once applying (the two cores give 2000 ms a second in all)
        "worker_cpu_ms_per_session": round(cpu["workers"] / done * 1000) if done else None,
        "postgres_cpu_ms_per_session": round(cpu["postgres"] / done * 1000) if done else None,
        "exited_early": [p.returncode for p in procs if p.returncode not in (None, 0, -15)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="1,2,4", help="worker process counts")
    ap.add_argument("--sessions", type=int, default=600)
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4, help="threads a worker")
    ap.add_argument(
        "--seconds", type=float, default=40.0, help=f"per configuration, <= {MAX_SECONDS:g}"
    )
    ap.add_argument("--llm-delay", default="0.1,0.3", help="seconds a model call takes: lo,hi")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    lo, hi = (float(x) for x in args.llm_delay.split(","))

    from deltamem.expiry import ExpiryConfig
    from deltamem.memory import Memory

    llm = FakeLLM(delay=(lo, hi))
    pg = PgServer()
    results: list[dict[str, Any]] = []
    try:
        import psycopg

        with psycopg.connect(pg.uri, autocommit=True) as conn:
            conn.execute("CREATE DATABASE scaling_base")
        base = dsn(pg.uri, "scaling_base")
        t = time.monotonic()
        with Memory(base, llm="tiny", expiry=ExpiryConfig()) as mem:
            logged = mem.add_many(sessions(args.sessions, args.users), infer=True)
        load_s = time.monotonic() - t
        with tempfile.TemporaryDirectory(prefix="deltamem-scaling-") as tmp:
            for k in (int(x) for x in args.workers.split(",")):
                with psycopg.connect(pg.uri, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE scaling_{k} TEMPLATE scaling_base")
                url = dsn(pg.uri, f"scaling_{k}")
                results.append(
                    run_config(url, k, llm.spec, args.concurrency, seconds, Path(tmp), pg.datadir)
                )
                if not args.json:
                    print(json.dumps(results[-1]), flush=True)
    finally:
        llm.close()
        pg.stop()
    out = {
        "command": f"python benchmarks/worker_scaling.py {' '.join(sys.argv[1:])}".strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "sessions": args.sessions,
        "users": args.users,
        "llm_delay_s": [lo, hi],
        "queued": logged.logged,
        "queue_load_seconds": round(load_s, 1),
        "configs": results,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
