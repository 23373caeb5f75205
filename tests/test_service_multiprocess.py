"""Several processes on one store (a SQLite file, or a PostgreSQL database).

* Two `deltamem serve` processes (an API and a worker each), with 4 writer threads
  submitting sessions for ONE user through both of them: every session is applied
  exactly once, in log order, with exactly its memories, and, thanks to the user
  lease, planned by the LLM exactly once (no work spent twice).
* Two `deltamem worker --once` processes draining a log that a third party wrote:
  the same guarantees, through the CLI's extra workers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from pg import pg_server_fixture

# the fake model answers with whole operation lists (the "session" strategy)
pytestmark = pytest.mark.usefixtures("session_manager_env")

WRITERS = 4
PER_WRITER = 6


def _crash_trials() -> ModuleType:
    if "crash_trials" in sys.modules:
        return sys.modules["crash_trials"]
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "crash_trials.py"
    spec = importlib.util.spec_from_file_location("crash_trials", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crash_trials"] = mod
    spec.loader.exec_module(mod)
    return mod


ct = _crash_trials()
_pg_server = pg_server_fixture()


@pytest.fixture
def fake_llm() -> Iterator[Any]:
    llm = ct.FakeLLM(delay=(0.02, 0.15), seed=5)
    try:
        yield llm
    finally:
        llm.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_server_processes_on_one_store_apply_each_session_once(
    backend: str, fake_llm: Any, request: pytest.FixtureRequest
) -> None:
    with tempfile.TemporaryDirectory(prefix="deltamem-mp-") as tmp:
        db: str | Path = Path(tmp) / "mp.db"
        if backend == "postgres":
            from test_service_crash import fresh_database

            db = fresh_database(request.getfixturevalue("pg_server"), "multiprocess")
        expected: dict[str, set[str]] = {}
        acked: dict[int, list[str]] = {w: [] for w in range(WRITERS)}
        errors: list[str] = []
        with (
            ct.server(db, fake_llm.spec, Path(tmp) / "a.log") as a,
            ct.server(db, fake_llm.spec, Path(tmp) / "b.log") as b,
        ):
            servers = [a, b]
            barrier = threading.Barrier(WRITERS)

            def writer(w: int) -> None:
                srv = servers[w % 2]
                barrier.wait(10)
                with httpx.Client(base_url=srv.url, headers=ct.HEADERS, timeout=30) as client:
                    for i in range(PER_WRITER):
                        n = 1 + (w * PER_WRITER + i) * 2
                        sid = f"w{w}-{i:02d}"
                        expected[sid] = {ct.fact(n), ct.fact(n + 1)}
                        body = {
                            "user_id": "shared",
                            "session_id": sid,
                            "timestamp": f"2029-02-{1 + i:02d}T10:00:00",
                            "messages": [
                                {"role": "user", "content": f"Remember fact#{n} and fact#{n + 1}."},
                                {"role": "assistant", "content": "Noted."},
                            ],
                        }
                        r = client.post("/v1/sessions", json=body)
                        if r.status_code != 202:
                            errors.append(f"{sid}: {r.status_code} {r.text}")
                            return
                        acked[w].append(sid)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors, errors
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                healths = [s.health() for s in servers]
                if ct.count_status(db).get("pending", 0) == 0 and all(
                    h is not None and not h["worker"]["busy"] for h in healths
                ):
                    break
                time.sleep(0.1)
            healths = [s.health() for s in servers]
        state = ct.read_db(db)
        logs = "".join((Path(tmp) / n).read_text(errors="replace") for n in ("a.log", "b.log"))

    # a worker that lost a race for a session saw no failure (no traceback, no retry)
    assert "Traceback" not in logs and "failed (try" not in logs, logs[-3000:]
    print("races lost by a worker:", logs.count("was applied by another worker"))

    total = WRITERS * PER_WRITER
    sessions = state["sessions"]
    assert sum(len(v) for v in acked.values()) == total
    assert len(sessions) == total
    assert all(s["status"] == "applied" for s in sessions), [
        (s["session_id"], s["status"], s["error"]) for s in sessions
    ]
    assert all(s["attempts"] == 1 for s in sessions)
    assert ct.check_consistent(state) == {"half_applied": 0, "applied_twice": 0}
    for h in healths:
        assert h is not None and h["worker"]["failed"] == 0, healths
    # the two workers together applied each session once, and planned it once
    assert sum(h["worker"]["applied"] for h in healths if h) == total
    assert sum(fake_llm.planned.values()) == total, fake_llm.planned
    assert max(fake_llm.planned.values()) == 1

    for s in sessions:
        ops = json.loads(s["operations"])
        assert {o["content"] for o in ops} == expected[s["session_id"]]
    mems = [m for m in state["memories"] if m["user_id"] == f"{ct.TENANT}:shared"]
    assert len(mems) == 2 * total
    assert max(Counter(h["memory_id"] for h in state["history"]).values()) == 1

    seq = {s["session_id"]: s["seq"] for s in sessions}
    for sids in acked.values():
        assert [seq[s] for s in sids] == sorted(seq[s] for s in sids)
    by_time = sorted(sessions, key=lambda s: datetime.fromisoformat(s["applied_at"]))
    assert [s["seq"] for s in by_time] == [s["seq"] for s in sessions]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_worker_processes_drain_a_shared_log_once_each(
    backend: str, fake_llm: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import subprocess

    from deltamem.memory import Memory

    db: str | Path = tmp_path / "workers.db"
    if backend == "postgres":
        from test_service_crash import fresh_database

        db = fresh_database(request.getfixturevalue("pg_server"), "workers")
    users, per_user = 3, 5
    expected: dict[str, set[str]] = {}
    mem = Memory(db, llm=fake_llm.spec)
    try:
        for i in range(per_user):  # interleaved users, as a busy API would log them
            for u in range(users):
                n = 1 + (u * per_user + i) * 2
                sid = f"u{u}-{i:02d}"
                expected[sid] = {ct.fact(n), ct.fact(n + 1)}
                mem.log_session(
                    [
                        {"role": "user", "content": f"Remember fact#{n} and fact#{n + 1}."},
                        {"role": "assistant", "content": "Noted."},
                    ],
                    user_id=f"user{u}",
                    session_id=sid,
                    timestamp=datetime(2029, 3, 1 + i, 10),
                )
    finally:
        mem.close()
    cmd = [sys.executable, "-m", "deltamem", "--db", str(db), "--llm", fake_llm.spec]
    workers = [
        subprocess.Popen(
            [*cmd, "worker", "--once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [w.communicate(timeout=150) for w in workers]
    assert all(w.returncode == 0 for w in workers), outs
    handled = [int(out.split()[0]) for out, _ in outs]
    # each session handled by exactly one of the two (and planned once)
    assert sum(handled) == users * per_user, outs
    assert sum(fake_llm.planned.values()) == users * per_user
    assert max(fake_llm.planned.values()) == 1
    state = ct.read_db(db)
    assert ct.check_consistent(state) == {"half_applied": 0, "applied_twice": 0}
    by_user: dict[str, list[str]] = {}
    for s in state["sessions"]:
        assert s["status"] == "applied" and s["attempts"] == 1, s
        assert {o["content"] for o in json.loads(s["operations"])} == expected[s["session_id"]]
        by_user.setdefault(s["user_id"], []).append(str(s["applied_at"]))
    # per user, sessions applied in log order
    for applied in by_user.values():
        assert applied == sorted(applied)
