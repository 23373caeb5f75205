"""Expiry (deltamem/expiry.py): a memory past its `expires_at` leaves search, get_all
and what `answer` reads, as an outdated one does; get and history keep it until a
sweep deletes it. On both stores (the `store` fixture), through the store and
through `Memory`; then REST, the CLI, the worker's sweep and export/import."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, T0, ScriptedLLM, add, ops, session, unit
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from deltamem.cli.main import app as cli
from deltamem.embed import Embedder
from deltamem.expiry import ExpiryConfig, parse_duration
from deltamem.memory import InvalidSession, Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.server.worker import Worker
from deltamem.store.base import PlannedWrite, Store
from deltamem.store.sqlite import SQLiteStore
from deltamem.types import SearchFilters, utcnow

PAST = datetime(2020, 1, 1, tzinfo=UTC)
FUTURE = datetime(2100, 1, 1, tzinfo=UTC)
DAYS_30 = timedelta(days=30)


def write(content: str, vec: Any = None, **kw: Any) -> PlannedWrite:
    return PlannedWrite("add", content, unit(1.0) if vec is None else vec, **kw)


def ingest(store: Store, sid: str, *writes: PlannedWrite, **kw: Any) -> list[str]:
    stored, _ = store.log_session(session(sid, **kw))
    return [o.memory_id or "" for o in store.apply_session(stored, list(writes), [])]


# --- the store ----------------------------------------------------------------------------
def test_an_expired_memory_leaves_the_listing_not_get_or_history(store: Store) -> None:
    gone, kept, never = ingest(
        store,
        "s1",
        write("Alice has a dentist appointment on Friday.", expires_at=PAST),
        write("Alice is flying to Oslo next month.", unit(0, 1), expires_at=FUTURE),
        write("Alice likes green tea.", unit(0, 0, 1)),
    )
    assert [m.id for m in store.list_memories("u1")] == [kept, never]
    listed = store.list_memories("u1", filters=SearchFilters(expired=True))
    assert {m.id for m in listed} == {gone, kept, never}
    old = store.get(gone)
    assert old is not None and old.expires_at == PAST and old.expired()
    later = store.get(kept)
    assert later is not None and later.expires_at == FUTURE and not later.expired()
    assert later.expired(FUTURE)  # at its expiry it is expired
    assert [h.op for h in store.history(gone)] == ["add"]


def test_set_expiry_and_an_update_keeps_or_replaces_it(store: Store) -> None:
    [mid] = ingest(store, "s1", write("Alice is in Lisbon this week.", expires_at=FUTURE))
    # an update without an expiry keeps the memory's; with one, it replaces it
    stored, _ = store.log_session(session("s2", timestamp=T0 + timedelta(days=1)))
    store.apply_session(
        stored, [PlannedWrite("update", "Alice is in Porto this week.", unit(1.0), mid)], []
    )
    m = store.get(mid)
    assert m is not None and m.expires_at == FUTURE and m.version == 2
    assert store.set_expiry(mid, PAST)
    assert [x.id for x in store.list_memories("u1")] == []
    assert store.set_expiry(mid, None)
    m = store.get(mid)
    assert m is not None and m.expires_at is None and m.version == 2  # no new version
    assert [x.id for x in store.list_memories("u1")] == [mid]
    assert not store.set_expiry("no-such-memory", PAST)


def test_sweep_deletes_only_what_expired_with_a_delete_in_history(store: Store) -> None:
    now = T0 + timedelta(days=40)
    first, second, live = ingest(
        store,
        "s1",
        write("Alice's parcel arrives Tuesday.", expires_at=T0 + timedelta(days=2)),
        write("Alice has a cold.", unit(0, 1), expires_at=now),
        write("Alice's parcel never came.", unit(0, 0, 1), expires_at=now + timedelta(seconds=1)),
    )
    [bob] = ingest(store, "s9", write("Bob has a cold.", expires_at=T0), user_id="u2")
    assert {m.id for m in store.sweep_expired(now, user_id="u1")} == {first, second}
    assert store.get(first) is None and store.get(second) is None
    assert store.get(bob) is not None  # another user's: not swept with u1's
    h = store.history(first)
    assert [(e.op, e.actor, e.old_content) for e in h] == [
        ("add", "manager", None),
        ("delete", "expiry", "Alice's parcel arrives Tuesday."),
    ]
    # gone from the rankings too (the cached banks reload)
    assert [i for i, _ in store.dense_search("u1", unit(1.0), 5)] == [live]
    assert [m.id for m in store.sweep_expired(now)] == [bob]
    assert store.sweep_expired(now) == []


def test_a_session_keeps_its_expiry_in_the_log(store: Store) -> None:
    rec = session("s1").model_copy(update={"expires_at": FUTURE})
    stored, created = store.log_session(rec)
    assert created and stored.expires_at == FUTURE
    again = store.get_session("u1", "s1")
    assert again is not None and again.expires_at == FUTURE
    assert store.list_sessions("u1")[0].expires_at == FUTURE


# --- Memory --------------------------------------------------------------------------------
@pytest.fixture
def make_mem(store: Store, embedder: Embedder) -> Iterator[Any]:
    def make(llm: ScriptedLLM, expiry: ExpiryConfig | None = None) -> Memory:
        return Memory(
            llm=llm, embedder=embedder, store=store, config=SESSION, expiry=expiry or ExpiryConfig()
        )

    yield make


def said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_a_ttl_per_type_counts_from_the_sessions_event_time(make_mem: Any) -> None:
    llm = ScriptedLLM()
    mem = make_mem(llm, ExpiryConfig(ttl={"event": DAYS_30}))
    recent = utcnow() - timedelta(days=1)
    llm.push(ops(add("Alice has a dentist appointment on Friday.", "event")))
    dentist = said("I have a dentist appointment on Friday.")
    mem.add(dentist, user_id="alice", timestamp="2025-03-01")
    llm.push(ops(add("Alice moved to Lisbon.", "event"), add("Alice loves jazz.", "persona")))
    mem.add(said("I moved to Lisbon! I love jazz."), user_id="alice", timestamp=recent)

    every = mem.get_all(user_id="alice", filters={"expired": True})
    expiry = {m.content: m.expires_at for m in every}
    assert expiry == {
        "Alice has a dentist appointment on Friday.": datetime(2025, 3, 31, tzinfo=UTC),
        "Alice moved to Lisbon.": recent + DAYS_30,
        "Alice loves jazz.": None,  # persona: no TTL
    }
    # the dentist's memory expired long ago: out of get_all, search and what answer reads
    live = [m.content for m in mem.get_all(user_id="alice")]
    assert live == ["Alice moved to Lisbon.", "Alice loves jazz."]
    hits = mem.search("When is Alice's dentist appointment?", user_id="alice", tiers="facts")
    assert "Alice has a dentist appointment on Friday." not in [h.memory.content for h in hits]
    read = [h.memory.content for h in mem.context("dentist appointment", user_id="alice")]
    assert not any("dentist" in t for t in read)  # neither the fact nor the turn that said it
    # get and history keep it until the sweep
    [old] = [m for m in every if "dentist" in m.content]
    assert mem.get(old.id) is not None and [h.op for h in mem.history(old.id)] == ["add"]
    assert [m.id for m in mem.sweep_expired()] == [old.id]
    assert mem.get(old.id) is None
    swept = [(h.op, h.actor) for h in mem.history(old.id)]
    assert swept == [("add", "manager"), ("delete", "expiry")]


def test_a_sessions_expiry_reaches_the_memories_derived_later(make_mem: Any) -> None:
    llm = ScriptedLLM()
    mem = make_mem(llm, ExpiryConfig(ttl={"persona": DAYS_30}))
    res = mem.add(
        said("I'm staying at the Hotel Lux until Sunday."),
        user_id="alice",
        session_id="s1",
        timestamp="2029-02-13",
        infer=False,
        expires_at="2029-02-18T12:00:00",  # naive: UTC
    )
    assert res.status == "deferred"
    logged = mem.session("s1", user_id="alice")
    assert logged is not None and logged.expires_at == datetime(2029, 2, 18, 12, tzinfo=UTC)
    llm.push(ops(add("Alice is staying at the Hotel Lux until Sunday.")))
    mem.process_pending()
    [m] = mem.get_all(user_id="alice", filters={"expired": True})
    assert m.expires_at == datetime(2029, 2, 18, 12, tzinfo=UTC)  # the session's, over the TTL
    with pytest.raises(InvalidSession, match="expires_at"):
        mem.add(said("hi"), user_id="alice", infer=False, expires_at="next blue moon")


def test_set_expiry_through_memory(make_mem: Any) -> None:
    llm = ScriptedLLM()
    mem = make_mem(llm)
    llm.push(ops(add("Alice is on holiday in Crete.")))
    mem.add(said("I'm on holiday in Crete."), user_id="alice", timestamp="2029-02-13")
    [m] = mem.get_all(user_id="alice")
    assert m.expires_at is None
    got = mem.set_expiry(m.id, "2020-01-01")
    assert got is not None and got.expires_at == PAST
    assert mem.get_all(user_id="alice") == []
    assert mem.search("Where is Alice on holiday?", user_id="alice", tiers="facts") == []
    assert mem.set_expiry("nope", None) is None


# --- configuration ---------------------------------------------------------------------------
def test_durations_and_ttls_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_duration("30d") == DAYS_30
    assert parse_duration("1d12h") == timedelta(hours=36)
    assert parse_duration(" 90 m ") == timedelta(minutes=90)
    for bad in ("", "30", "d", "-1d", "0s", "3 days", "1x"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    monkeypatch.setenv("DELTAMEM_TTL_EVENT", "30d")
    monkeypatch.setenv("DELTAMEM_TTL_RELATIONSHIP", "2w")
    assert ExpiryConfig.from_env().ttl == {"event": DAYS_30, "relationship": timedelta(days=14)}
    monkeypatch.setenv("DELTAMEM_TTL_PERSONA", "soon")
    with pytest.raises(ValueError, match="DELTAMEM_TTL_PERSONA"):
        ExpiryConfig.from_env()
    with pytest.raises(ValueError, match="no memory type"):
        ExpiryConfig(ttl={"mood": DAYS_30})  # type: ignore[dict-item]


# --- REST, CLI, worker, export ---------------------------------------------------------------
KEY = "key-of-tenant-a-0123456789"
H = {"Authorization": f"Bearer {KEY}"}


def responder(messages: list[dict[str, str]]) -> Any:
    convo = messages[-1]["content"].split("Conversation", 1)[-1]
    words = dict.fromkeys(re.findall(r"codeword=(\w+)", convo))
    return {"operations": [add(f"The user's codeword is {w}.", "event") for w in words]}


def sqlite_memory(tmp_path: Path, embedder: Embedder, name: str = "m") -> Memory:
    st = SQLiteStore(tmp_path / f"{name}.db", dim=embedder.dim, embedder_name=embedder.name)
    return Memory(
        llm=ScriptedLLM(default=responder),
        embedder=embedder,
        store=st,
        config=SESSION,
        expiry=ExpiryConfig(),
    )


def test_rest_sets_expiry_on_a_session_and_by_patch(tmp_path: Path, embedder: Embedder) -> None:
    mem = sqlite_memory(tmp_path, embedder)
    fast = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)
    with TestClient(create_app(mem, {KEY: "a"}, worker_settings=fast)) as client:
        body = {
            "user_id": "u",
            "session_id": "s1",
            "timestamp": "2029-02-13T10:51:39",
            "expires_at": "2100-01-01T00:00:00Z",
            "messages": [{"role": "user", "content": "Note codeword=apple please."}],
        }
        assert client.post("/v1/sessions", json=body, headers=H).status_code == 202
        assert client.app.state.worker.wait_idle(10)  # type: ignore[attr-defined]
        [fact] = client.get("/v1/memories", params={"user_id": "u"}, headers=H).json()["memories"]
        assert fact["expires_at"].startswith("2100-01-01T00:00:00")
        mid = fact["id"]
        r = client.patch(f"/v1/memories/{mid}", json={"expires_at": "2020-01-01"}, headers=H)
        assert r.status_code == 200, r.text
        assert r.json()["expires_at"].startswith("2020-01-01") and r.json()["version"] == 1
        listed = client.get("/v1/memories", params={"user_id": "u"}, headers=H).json()
        assert listed["memories"] == []
        hits = client.post("/v1/search", json={"query": "codeword", "user_id": "u"}, headers=H)
        assert [h for h in hits.json()["results"] if h["kind"] == "fact"] == []
        assert client.get(f"/v1/memories/{mid}", headers=H).status_code == 200  # get keeps it
        # cleared (null), then an unreadable time: 422, nothing changed
        r = client.patch(f"/v1/memories/{mid}", json={"expires_at": None}, headers=H)
        assert r.status_code == 200 and r.json()["expires_at"] is None
        for bad in ("someday", "0001-01-01T00:00:00+14:00"):  # unreadable; not a UTC instant
            r = client.patch(f"/v1/memories/{mid}", json={"expires_at": bad}, headers=H)
            assert r.status_code == 422, r.text
        assert client.patch(f"/v1/memories/{mid}", json={}, headers=H).status_code == 422
        bad = {**body, "session_id": "s2", "expires_at": "someday"}
        assert client.post("/v1/sessions", json=bad, headers=H).status_code == 422
    mem.close()


def test_cli_sweep_and_the_workers_sweep(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = sqlite_memory(tmp_path, embedder)
    mem.add(said("codeword=pear"), user_id="u", session_id="s1", expires_at="2020-01-01")
    mem.add(said("codeword=plum"), user_id="u", session_id="s2", expires_at="2020-01-01")
    mem.add(said("codeword=fig"), user_id="v", session_id="s1", expires_at="2020-01-01")
    assert len(mem.get_all(user_id="u", filters={"expired": True})) == 2
    monkeypatch.setenv("DELTAMEM_DB", str(tmp_path / "m.db"))
    monkeypatch.setenv("DELTAMEM_LLM", "tiny")  # never loaded: sweeping calls no model
    r = CliRunner().invoke(cli, ["sweep", "--user", "v", "--json"])
    assert r.exit_code == 0, r.output
    assert [x["user_id"] for x in json.loads(r.stdout)] == ["v"]
    # a worker configured to sweep deletes the rest on its first round
    worker = Worker(mem, WorkerSettings(poll_interval=0.05, sweep_every=3600.0, concurrency=1))
    worker.start()
    try:
        for _ in range(200):
            if worker.stats.swept == 2:
                break
            worker.wake()
            time.sleep(0.05)
    finally:
        worker.stop()
    assert worker.stats.swept == 2
    assert mem.get_all(user_id="u", filters={"expired": True}) == []
    r = CliRunner().invoke(cli, ["worker", "--sweep-every", "soon", "--once"])
    assert r.exit_code == 2 and "sweep-every" in r.output
    mem.close()


def test_export_and_import_carry_expiry(tmp_path: Path, embedder: Embedder) -> None:
    mem = sqlite_memory(tmp_path, embedder)
    mem.add(said("codeword=kiwi"), user_id="u", session_id="s1", expires_at="2100-01-01")
    mem.add(said("codeword=lime"), user_id="u", session_id="s2", expires_at="2020-01-01")
    mem.export_user("u", tmp_path / "u.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "u.jsonl").read_text().splitlines()]
    memories = {x["content"]: x["expires_at"] for x in lines if x.get("kind") == "memory"}
    assert len(memories) == 2  # the expired one too: it is not swept yet
    other = sqlite_memory(tmp_path, embedder, "other")
    other.import_user(tmp_path / "u.jsonl")
    got = {m.content: m.expires_at for m in other.get_all(user_id="u", filters={"expired": True})}
    assert got == {
        "The user's codeword is kiwi.": datetime(2100, 1, 1, tzinfo=UTC),
        "The user's codeword is lime.": PAST.replace(year=2020),
    }
    assert [m.content for m in other.get_all(user_id="u")] == ["The user's codeword is kiwi."]
    s1 = other.session("s1", user_id="u")
    assert s1 is not None and s1.expires_at == datetime(2100, 1, 1, tzinfo=UTC)
    other.close()
    mem.close()
