"""A hung model against the real service: how long until its session is parked, how
long another tenant's sessions take meanwhile, how long SIGTERM takes.

    python benchmarks/hung_model.py --llm-timeout 5 --json
    python benchmarks/hung_model.py --llm-timeout 5 --backend postgres --json

Starts the scripted OpenAI-compatible model of benchmarks/crash_trials.py on
127.0.0.1, told to never answer a prompt holding ``HANG`` (it reads the request and
holds the connection open: a model that accepted the request and hangs), and
``deltamem --llm-timeout T serve`` (SQLite in a temp dir, or a fresh database on a
throwaway PostgreSQL) with two tenants. Then:

1. tenant A submits a session whose model call hangs; while the model holds it,
   tenant B submits `--b-sessions` sessions one after the other, each timed from
   submission to ``applied`` (B's latency while A's model hangs);
2. A's job is timed from submission to ``failed`` (parked after its tries): the
   bound stated in the README is tries x T + the backoff (3 x T + 6 s);
3. A submits another hanging session; once the model holds it, the server gets
   SIGTERM, timed to exit; the session must then be pending in the log (left for
   the next worker), with no lease held.

Everything started here is stopped on exit. Prints JSON figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx


def _crash_trials() -> ModuleType:
    path = Path(__file__).resolve().parent / "crash_trials.py"
    spec = importlib.util.spec_from_file_location("crash_trials", path)
    assert spec is not None and spec.loader is not None
    mod = sys.modules.setdefault("crash_trials", importlib.util.module_from_spec(spec))
    if not hasattr(mod, "Server"):
        spec.loader.exec_module(mod)
    return mod


ct = _crash_trials()
KEY_A, KEY_B = "hung-tenant-a-key-0123456789", "hung-tenant-b-key-0123456789"
HA, HB = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}


def session(user: str, sid: str, text: str) -> dict[str, Any]:
    return {"user_id": user, "session_id": sid, "messages": [{"role": "user", "content": text}]}


def wait_status(
    client: httpx.Client, job: str, headers: dict[str, str], want: str, limit: float
) -> float | None:
    """Seconds until the job has status `want` (polled every 20 ms), None after `limit`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if client.get(f"/v1/jobs/{job}", headers=headers).json()["status"] == want:
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def wait_until(pred: Any, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def run(db: str, llm: Any, workdir: Path, timeout: float, b_sessions: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    srv = ct.Server(
        db,
        llm.spec,
        workdir / "server.log",
        keys=f"{KEY_A}=ta,{KEY_B}=tb",
        options=["--llm-timeout", str(timeout)],
    )
    ct._live.append(srv)
    try:
        srv.wait_ready()
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            # warm: the first session loads the embedder; not what is measured
            warm = client.post("/v1/sessions", json=session("b0", "w", "fact#1"), headers=HB)
            assert wait_status(client, warm.json()["job_id"], HB, "applied", 120) is not None

            t_a = time.monotonic()
            a = client.post("/v1/sessions", json=session("a1", "s1", "HANG fact#2"), headers=HA)
            a_job = a.json()["job_id"]
            assert wait_until(lambda: llm.hanging >= 1, 60), "the model never got A's call"
            latencies = []
            for n in range(b_sessions):
                body = session("b1", f"s{n}", f"fact#{10 + n}")
                r = client.post("/v1/sessions", json=body, headers=HB)
                took = wait_status(client, r.json()["job_id"], HB, "applied", 4 * timeout + 30)
                assert took is not None, f"tenant B's session {n} was not applied"
                latencies.append(took)
            out["b_sessions"] = b_sessions
            out["b_latency_s_p50"] = round(statistics.median(latencies), 3)
            out["b_latency_s_max"] = round(max(latencies), 3)
            out["a_still_running_after_b"] = (
                client.get(f"/v1/jobs/{a_job}", headers=HA).json()["status"] == "running"
            )

            parked = wait_status(client, a_job, HA, "failed", 6 * timeout + 60)
            assert parked is not None, "tenant A's session was never parked"
            job = client.get(f"/v1/jobs/{a_job}", headers=HA).json()
            out["a_parked_after_s"] = round(time.monotonic() - t_a, 2)
            out["a_attempts"] = job["attempts"]
            out["a_error"] = job["error"]
            out["bound_s"] = 3 * timeout + 6

            before = llm.hanging
            client.post("/v1/sessions", json=session("a2", "s1", "HANG fact#3"), headers=HA)
            assert wait_until(lambda: llm.hanging > before, 60)
        t0 = time.monotonic()
        os.killpg(srv.proc.pid, signal.SIGTERM)
        srv.proc.wait(60)
        out["sigterm_exit_s"] = round(time.monotonic() - t0, 2)
        out["sigterm_returncode"] = srv.proc.returncode
    finally:
        srv.kill9()
        ct._live.remove(srv)
    state = ct.read_db(db)
    left = [s for s in state["sessions"] if s["user_id"] == "ta:a2"]
    out["after_sigterm_status"] = left[0]["status"] if left else None
    out["after_sigterm_attempts"] = left[0]["attempts"] if left else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm-timeout", type=float, default=5.0)
    ap.add_argument("--b-sessions", type=int, default=5)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    llm = ct.FakeLLM(delay=(0.05, 0.1), hang=lambda prompt: "HANG" in prompt)
    pg = ct.PgCluster() if args.backend == "postgres" else None
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="deltamem-hung-") as tmp:
            db = pg.fresh() if pg else str(Path(tmp) / "hung.db")
            figures = run(db, llm, Path(tmp), args.llm_timeout, args.b_sessions)
            if pg:
                pg.drop(db)
    finally:
        ct.stop_all()
        llm.close()
        if pg:
            with contextlib.suppress(Exception):
                pg.stop()
    out = {"backend": args.backend, "llm_timeout_s": args.llm_timeout, **figures}
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
