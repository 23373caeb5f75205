"""Two `deltamem serve` processes (two workers, no leases) on one store (a SQLite
file, or a PostgreSQL database), with
4 writer threads submitting sessions for ONE user through both of them.

The workers race for the same pending sessions; the store refuses a second apply
inside the apply transaction, so every session must still be applied exactly once,
in log order, with exactly its memories. (Both processes may spend LLM work on the
same session: there are no leases.)
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
    # the two workers together applied each session once
    assert sum(h["worker"]["applied"] for h in healths if h) == total

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
