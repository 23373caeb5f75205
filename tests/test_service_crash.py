"""Kill -9 drill for the service: a few trials of benchmarks/crash_trials.py.

Each trial runs the real `deltamem serve` as a subprocess on 127.0.0.1 (SQLite in a
temp dir, or a fresh PostgreSQL database; a scripted OpenAI-compatible LLM on
loopback), SIGKILLs it at a random
moment while sessions are submitted or ingested, restarts it, waits until the log
is drained, and checks: no acknowledged session lost, none half-applied (at the
crash and after), all applied exactly once, each user's in submission order.
The 100-trial run is `python benchmarks/crash_trials.py --trials 100 --json`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pg import pg_server_fixture

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "crash_trials", ROOT / "benchmarks" / "crash_trials.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crash_trials"] = mod
    spec.loader.exec_module(mod)
    return mod


ct = _load()
_pg_server = pg_server_fixture()


def fresh_database(server: Any, name: str) -> str:
    """A postgresql:// URL of a new, empty database (with `vector`) on `server`."""
    import psycopg

    with psycopg.connect(server.uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    base, sep, query = server.uri.partition("?")
    url = base.rsplit("/", 1)[0] + "/" + name + sep + query
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


@pytest.fixture(scope="module")
def fake_llm() -> Any:
    llm = ct.FakeLLM(seed=7)
    try:
        yield llm
    finally:
        ct.stop_all()
        llm.close()


def _session(status: str, ops: list[dict[str, Any]] | None, attempts: int = 1) -> dict[str, Any]:
    return {
        "user_id": "drill:u",
        "session_id": "s1",
        "status": status,
        "operations": json.dumps(ops) if ops is not None else None,
        "attempts": attempts,
    }


def test_the_checker_sees_half_applied_and_doubly_applied_sessions() -> None:
    """The drill's verdicts can fail: fabricated bad states are caught."""
    add = {"op": "add", "memory_id": "m1", "content": "x"}
    hist = {"user_id": "drill:u", "session_id": "s1", "op": "add", "memory_id": "m1"}
    mem = {"id": "m1", "user_id": "drill:u", "session_id": "s1"}
    good = {"sessions": [_session("applied", [add])], "history": [hist], "memories": [mem]}
    assert ct.check_consistent(good) == {"half_applied": 0, "applied_twice": 0}
    pending_with_rows = {
        "sessions": [_session("pending", None, 0)],
        "history": [hist],
        "memories": [mem],
    }
    assert ct.check_consistent(pending_with_rows)["half_applied"] == 1
    missing_history = {"sessions": [_session("applied", [add])], "history": [], "memories": []}
    assert ct.check_consistent(missing_history)["half_applied"] == 1
    twice = {
        "sessions": [_session("applied", [add])],
        "history": [hist, {**hist, "memory_id": "m2"}],
        "memories": [mem],
    }
    assert ct.check_consistent(twice)["applied_twice"] == 1


def test_the_checker_sees_an_update_applied_without_its_session() -> None:
    add = {"op": "add", "memory_id": "m1", "content": "x"}
    upd = {"op": "update", "memory_id": "m1", "content": "y"}
    hist = {"user_id": "drill:u", "session_id": "s1", "op": "add", "memory_id": "m1"}
    s2 = {**_session("applied", [upd]), "session_id": "s2"}
    good = {
        "sessions": [_session("applied", [add]), s2],
        "history": [hist, {**hist, "session_id": "s2", "op": "update"}],
        "memories": [],
    }
    assert ct.check_consistent(good) == {"half_applied": 0, "applied_twice": 0}
    lost_update = {**good, "history": [hist]}
    assert ct.check_consistent(lost_update)["half_applied"] == 1


def _chain(*rows: tuple[str, str | None, str, str]) -> dict[str, Any]:
    """A state with memory m1 and its history rows (op, old, new, session)."""
    history = [
        {
            "id": i,
            "memory_id": "m1",
            "user_id": "drill:u",
            "op": op,
            "old_content": old,
            "new_content": new,
            "session_id": sid,
        }
        for i, (op, old, new, sid) in enumerate(rows)
    ]
    sessions = [_session("applied", [])] + [
        {**_session("applied", []), "session_id": sid} for sid in ("s2", "s3")
    ]
    last = rows[-1][2] if rows else "x"
    memory = {"id": "m1", "user_id": "drill:u", "session_id": "s1", "content": last}
    return {
        "sessions": sessions,
        "history": history,
        "memories": [{**memory, "version": len(rows)}],
    }


def test_the_chain_checker_sees_every_kind_of_broken_chain() -> None:
    """The verdicts on version chains can fail: each fabricated fault is named."""
    good = _chain(("add", None, "a", "s1"), ("update", "a", "b", "s2"), ("update", "b", "c", "s3"))
    assert ct.check_chains(good) == []
    gap = _chain(("add", None, "a", "s1"), ("update", "b", "c", "s3"))  # prior version missing
    assert "does not start from the version before" in " ".join(ct.check_chains(gap))
    no_add = _chain(("update", "a", "b", "s2"))
    assert "is not add, updates" in " ".join(ct.check_chains(no_add))
    wrong_version = {**good, "memories": [{**good["memories"][0], "version": 2}]}
    assert "version 2 but 3 history rows" in " ".join(ct.check_chains(wrong_version))
    stale = {**good, "memories": [{**good["memories"][0], "content": "b"}]}
    assert "content is not the last" in " ".join(ct.check_chains(stale))
    unapplied = {**good, "sessions": [good["sessions"][0], _session("pending", None, 0)]}
    unapplied["sessions"][1]["session_id"] = "s2"
    assert "rows of sessions not applied" in " ".join(ct.check_chains(unapplied))
    orphan = {**good, "memories": []}
    assert "no memory, no delete" in " ".join(ct.check_chains(orphan))


def test_the_scripted_model_updates_the_memory_it_was_shown() -> None:
    prompt = (
        f"Known memories:\nm1 | 2029-02-01 | {ct.fact(5)}\n"
        f"m2 | 2029-02-01 | {ct.changed(9, 1)}\nConversation\n"
        f"user: Please remember fact#12.\nuser: {ct.changed(9, 1)} That has changed: change#9.2"
    )
    assert ct.manager_reply(prompt) == [
        {"op": "add", "type": "event", "content": ct.fact(12)},
        {"op": "update", "id": "m2", "type": "event", "content": ct.changed(9, 2)},
    ]
    not_shown = prompt.replace(f"m2 | 2029-02-01 | {ct.changed(9, 1)}\n", "")
    assert [o["op"] for o in ct.manager_reply(not_shown)] == ["add"]


def test_fact_sentences_are_distinct() -> None:
    assert len({ct.fact(n) for n in range(ct.FACT_SPACE)}) == ct.FACT_SPACE


def test_a_trial_changes_earlier_facts_of_the_same_user() -> None:
    import random

    subs = ct.plan_sessions(random.Random(3), 3, users=3, per_user=4)
    seen: dict[str, set[int]] = {}
    changes = 0
    for sub in subs:
        for n, _ in sub.changes:
            assert n in seen.get(sub.user, set())  # a fact of an earlier session of theirs
            changes += 1
        seen.setdefault(sub.user, set()).update(sub.facts)
    assert changes >= 2
    facts = [n for sub in subs for n in sub.facts]
    assert len(set(facts)) == len(facts)


def check(r: Any) -> None:
    assert r.acked >= 1
    assert r.lost == 0, r.notes
    assert r.half_applied_at_crash == 0, r.notes
    assert r.half_applied == 0, r.notes
    assert r.not_applied == 0 and r.failed == 0, r.notes
    assert r.applied_twice == 0, r.notes
    assert r.order_violations == 0, r.notes
    assert r.broken_chains_at_crash == 0 and r.broken_chains == 0, r.notes
    assert r.wrong_content == 0, r.notes
    assert r.updates >= r.changes_acked, r.notes  # every acknowledged change was applied
    assert r.logged >= r.acked


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_sigkill_of_the_server_loses_and_half_applies_nothing(
    seed: int, tmp_path: Path, fake_llm: Any
) -> None:
    check(ct.run_trial(seed, tmp_path, fake_llm.spec, users=3, per_user=4, drain_timeout=90.0))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", [21, 22])
def test_sigkill_drill_on_postgres(
    seed: int, tmp_path: Path, fake_llm: Any, pg_server: Any
) -> None:
    url = fresh_database(pg_server, f"drill_{seed}")
    r = ct.run_trial(seed, tmp_path, fake_llm.spec, users=3, per_user=4, drain_timeout=90.0, db=url)
    check(r)
