"""Bulk ingestion (deltamem/bulk.py): `Memory.add_many` and `deltamem import-sessions`
log many sessions without a model call, a bad one reported and the good ones kept;
`--resume` skips what is logged already. On both stores (the `store` fixture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops
from typer.testing import CliRunner

from deltamem.cli.main import app as cli
from deltamem.embed import Embedder
from deltamem.expiry import ExpiryConfig
from deltamem.memory import Memory
from deltamem.store.base import Store


def convo(i: int, turns: int = 2) -> list[dict[str, str]]:
    said = [{"role": "user", "content": f"Session {i}: my locker number is {1000 + i}."}]
    return said + [{"role": "assistant", "content": f"Noted, locker {1000 + i}."}] * (turns - 1)


@pytest.fixture
def mem(store: Store, embedder: Embedder) -> Memory:
    return Memory(
        llm=ScriptedLLM(), embedder=embedder, store=store, config=SESSION, expiry=ExpiryConfig()
    )


def test_add_many_logs_each_session_with_its_turns_and_reports_the_bad(mem: Memory) -> None:
    items: list[Any] = [
        {"session_id": f"s{i}", "timestamp": f"2029-02-{i + 1:02d}", "messages": convo(i, i + 1)}
        for i in range(5)
    ]
    items.insert(2, {"session_id": "bad1", "messages": []})  # no messages
    items.insert(4, {"session_id": "bad2"})  # no 'messages' at all
    items.append(convo(9))  # a bare list of messages: one session, id from its content
    items.append({"user_id": "bob", "session_id": "s0", "messages": convo(7)})
    seen: list[int] = []
    got = mem.add_many(items, user_id="alice", infer=False, batch=3, on_progress=seen.append)
    assert (got.logged, got.already) == (7, 0)
    assert [n for n, _ in got.errors] == [2, 4]
    assert "no messages" in got.errors[0][1] and "'messages'" in got.errors[1][1]
    assert sum(seen) == len(items) == got.seen
    logged = mem.sessions("alice")
    assert [r.status for r in logged] == ["deferred"] * 6
    # each session's own turns, embedded in a batch with the others'
    assert mem.store.count_episodes("alice") == 1 + 2 + 3 + 4 + 5 + 2
    hits = mem.search("locker 1003", user_id="alice", tiers="episodes", limit=3)
    assert hits[0].memory.session_id == "s3" and "1003" in hits[0].memory.content
    assert mem.sessions("bob")[0].session_id == "s0"
    # each turn has its own vector (embedded out of order, by length, and put back)
    for i in (0, 3):
        text = convo(i)[0]["content"]
        vector = mem.embedder.embed([f"user: {text}"])[0]
        [(best, score)] = mem.store.episode_dense_search("alice", vector, 1)
        [ep] = mem.store.get_episodes([best])
        assert (ep.session_id, ep.content, round(score, 3)) == (f"s{i}", text, 1.0)


def test_add_many_queues_for_the_workers_and_resume_skips(mem: Memory) -> None:
    items = [{"session_id": f"s{i}", "messages": convo(i)} for i in range(3)]
    got = mem.add_many(items, user_id="alice")
    assert got.logged == 3 and [r.status for r in mem.sessions("alice")] == ["pending"] * 3
    assert mem.get_all(user_id="alice") == []  # no model call here
    # again: the same sessions are logged already; one changed since is refused
    changed = [*items[:2], {"session_id": "s2", "messages": convo(42)}]
    again = mem.add_many(changed, user_id="alice")
    assert (again.logged, again.already) == (0, 2)
    assert [n for n, _ in again.errors] == [2] and "different content" in again.errors[0][1]
    # --resume: skipped by their key, whatever they hold now
    resumed = mem.add_many(
        [*changed, {"session_id": "s3", "messages": convo(3)}], user_id="alice", resume=True
    )
    assert (resumed.logged, resumed.already, resumed.errors) == (1, 3, [])
    # the same key twice in one batch: once
    twice = mem.add_many([{"session_id": "s9", "messages": convo(9)}] * 2, user_id="alice")
    assert (twice.logged, twice.already) == (1, 1)
    # the workers (here process_pending) apply them
    mem.llm.push(*[ops(add(f"Alice's locker is {1000 + i}.")) for i in range(5)])  # type: ignore[attr-defined]
    mem.process_pending("alice")
    assert [r.status for r in mem.sessions("alice")] == ["applied"] * 5
    assert mem.get_all(user_id="alice")


def test_import_sessions_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = [{"session_id": f"s{i}", "messages": convo(i)} for i in range(4)]
    lines = [json.dumps(x) for x in good[:2]]
    lines += ["{not json", "", json.dumps({"session_id": "x", "messages": "hi"})]
    lines += [json.dumps(x) for x in good[2:]]
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("DELTAMEM_DB", str(tmp_path / "m.db"))
    monkeypatch.setenv("DELTAMEM_LLM", "tiny")  # never loaded: logging calls no model
    run = CliRunner()
    r = run.invoke(cli, ["import-sessions", str(path), "--user", "alice", "--json"])
    assert r.exit_code == 1, r.output  # bad lines: reported, the good ones kept
    out = json.loads(r.stdout)
    assert out == {"logged": 4, "already_logged": 0, "bad_lines": [3, 5], "status": "pending"}
    assert "sessions.jsonl:3: invalid JSON" in r.stderr
    assert "sessions.jsonl:5: " in r.stderr
    r = run.invoke(cli, ["import-sessions", str(path), "-u", "alice", "--resume", "--no-infer"])
    assert r.exit_code == 1
    assert "0 session(s) stored verbatim, 4 already logged, 2 bad line(s)" in r.stdout
    r = run.invoke(cli, ["sessions", "--user", "alice", "--json"])
    assert [s["status"] for s in json.loads(r.stdout)] == ["pending"] * 4
    r = run.invoke(cli, ["import-sessions", str(tmp_path / "none.jsonl"), "-u", "alice"])
    assert r.exit_code != 0 and "no such file" in r.output
