"""Concurrency on one user: 4 writer threads submit through the API while 4 workers
(the app's own and 3 more on the same `Memory`) apply the log.

Checks: every submitted session is logged and applied exactly once, no memory is
lost or duplicated, each session's recorded operations are exactly what its LLM
answer asked for, each writer's sessions are logged in its submission order, and
the user's sessions are applied in log order.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM
from fastapi.testclient import TestClient

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.server.worker import Worker
from deltamem.store.sqlite import SQLiteStore

KEY = "key-of-tenant-c-0123456789"
HEADERS = {"X-API-Key": KEY}
WRITERS = 4
PER_WRITER = 8
SETTINGS = WorkerSettings(poll_interval=0.02, max_attempts=3, backoff=0.01)


def _facts_module() -> ModuleType:
    if "crash_trials" in sys.modules:
        return sys.modules["crash_trials"]
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "crash_trials.py"
    spec = importlib.util.spec_from_file_location("crash_trials", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crash_trials"] = mod
    spec.loader.exec_module(mod)
    return mod


fact = _facts_module().fact
FACT_RE = re.compile(r"fact#(\d+)")


def responder(messages: list[dict[str, str]]) -> Any:
    """One add per ``fact#N`` of the conversation, after a short random pause that
    widens the windows in which workers race."""
    time.sleep(random.uniform(0.0, 0.02))
    prompt = messages[-1]["content"]
    if "Conversation" not in prompt:
        return "I do not know."
    convo = prompt.split("Conversation", 1)[1]
    nums = dict.fromkeys(FACT_RE.findall(convo))
    return {"operations": [{"op": "add", "type": "event", "content": fact(int(n))} for n in nums]}


@pytest.mark.timeout(180)
def test_four_writers_and_four_workers_on_one_user(tmp_path: Path, embedder: Embedder) -> None:
    db = tmp_path / "conc.db"
    store = SQLiteStore(db, dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(default=responder), embedder=embedder, store=store, config=SESSION)
    app = create_app(mem, {KEY: "c"}, worker_settings=SETTINGS)
    extra = [Worker(mem, SETTINGS) for _ in range(3)]
    expected: dict[str, set[str]] = {}
    acked: dict[int, list[str]] = {w: [] for w in range(WRITERS)}
    errors: list[str] = []
    workers: list[Worker] = []
    try:
        with TestClient(app) as client:
            for w in extra:
                w.start()
            workers.extend([app.state.worker, *extra])
            start = threading.Barrier(WRITERS)

            def writer(w: int) -> None:
                start.wait(10)
                for i in range(PER_WRITER):
                    n = 1 + (w * PER_WRITER + i) * 2
                    sid = f"w{w}-{i:02d}"
                    expected[sid] = {fact(n), fact(n + 1)}
                    body = {
                        "user_id": "shared",
                        "session_id": sid,
                        "timestamp": f"2029-02-{1 + i:02d}T10:00:00",
                        "messages": [
                            {"role": "user", "content": f"Remember fact#{n} and fact#{n + 1}."},
                            {"role": "assistant", "content": "Noted."},
                        ],
                    }
                    r = client.post("/v1/sessions", json=body, headers=HEADERS)
                    if r.status_code != 202:
                        errors.append(f"{sid}: {r.status_code} {r.text}")
                        return
                    acked[w].append(sid)
                    time.sleep(random.uniform(0.0, 0.01))

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads)
            assert not errors, errors
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(w.idle() for w in workers):
                for w in workers:
                    w.wake()
                time.sleep(0.05)
            assert all(w.idle() for w in workers), [w.describe() for w in workers]
            listed = client.get("/v1/memories", params={"user_id": "shared"}, headers=HEADERS)
            assert listed.status_code == 200
            api_contents = [m["content"] for m in listed.json()["memories"]]
    finally:
        for w in extra:
            w.stop(10)
        mem.close()

    # a worker that lost a race to apply a session saw no failure
    for w in workers:
        assert w.stats.failed == 0 and w.stats.last_error is None, w.stats
    assert sum(w.stats.applied for w in workers) == WRITERS * PER_WRITER

    total = WRITERS * PER_WRITER
    assert sum(len(v) for v in acked.values()) == total

    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    sessions = [dict(r) for r in conn.execute("SELECT * FROM sessions ORDER BY seq")]
    history = [dict(r) for r in conn.execute("SELECT * FROM history ORDER BY id")]
    memories = [dict(r) for r in conn.execute("SELECT * FROM memories")]
    conn.close()

    # every acknowledged session logged once, applied once
    assert len(sessions) == total
    assert {s["session_id"] for s in sessions} == set(expected)
    assert all(s["status"] == "applied" for s in sessions), [
        (s["session_id"], s["status"], s["error"]) for s in sessions if s["status"] != "applied"
    ]
    assert all(s["attempts"] == 1 for s in sessions), [
        (s["session_id"], s["attempts"]) for s in sessions
    ]

    # no lost or duplicate memories, and each session wrote exactly its facts
    want = sorted(c for v in expected.values() for c in v)
    assert sorted(m["content"] for m in memories) == want
    assert sorted(api_contents) == want
    for s in sessions:
        ops = json.loads(s["operations"])
        assert {o["content"] for o in ops} == expected[s["session_id"]]
        assert all(o["op"] == "add" for o in ops)
        adds = sorted(h["memory_id"] for h in history if h["session_id"] == s["session_id"])
        assert adds == sorted(o["memory_id"] for o in ops)
    assert max(Counter(h["memory_id"] for h in history).values()) == 1

    # per-writer submission order is log order, and the user's log order is apply order
    seq = {s["session_id"]: s["seq"] for s in sessions}
    for w, sids in acked.items():
        assert [seq[s] for s in sids] == sorted(seq[s] for s in sids), w
    by_time = sorted(sessions, key=lambda s: datetime.fromisoformat(s["applied_at"]))
    assert [s["seq"] for s in by_time] == [s["seq"] for s in sessions]
    first_history = {}
    for h in history:
        first_history.setdefault(h["session_id"], h["id"])
    hist_order = sorted(first_history, key=first_history.__getitem__)
    assert hist_order == [s["session_id"] for s in sessions]
