"""Forgetting a user for real: after `Memory.reset(user)` (REST: DELETE
/v1/users/{user}) no row of the user is left in any table of the store, whatever
tables the schema has: the test lists them from the database itself (sqlite_master,
information_schema), FTS5's shadow tables included, so a table added later is
covered without touching this file. A second user, filled the same way, is left
exactly as they were.

A user is recognised by markers: their id and a word that only their messages
hold, looked for in every column of every row (text, JSON, vectors' and tsvectors'
text, blobs).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops
from test_porting import snapshot

from deltamem.embed import Embedder
from deltamem.llm.base import LLMError
from deltamem.memory import Memory, SessionFailed
from deltamem.store.base import Store

# each user's id and a word that only that user's messages (and so memories) hold
MARKERS = {"zq-alice": "quokkazanzibar", "zq-bob": "wombatlisbon"}
# the same users as a service's tenant "zq" holds them
TENANT_MARKERS = {"zq:alice": "quokkazanzibar", "zq:bob": "wombatlisbon"}


def fill(mem: Memory, llm: ScriptedLLM, who: str, *, lease: bool = True) -> None:
    """Rows of the user in every table: applied sessions (memories, history,
    episodes and their keyword index, model calls), an update, a deletion, a
    deferred and a failed session, an answer (a model call outside a session) and
    a lease."""
    word = {**MARKERS, **TENANT_MARKERS}[who]
    llm.push(ops(add(f"The user keeps a pet called {word}."), add(f"The user likes {word} tea.")))
    mem.add(
        [
            {"role": "user", "content": f"I keep a pet called {word}. I like {word} tea."},
            {"role": "assistant", "content": f"Noted: {word}."},
        ],
        user_id=who,
        session_id="s1",
        timestamp="2025-01-01T09:00:00+00:00",
    )
    tea = next(m for m in mem.get_all(user_id=who) if "tea" in m.content)
    mem.delete(tea.id)
    mem.add(
        [{"role": "user", "content": f"Remember {word} later."}],
        user_id=who,
        session_id="s2",
        infer=False,
    )
    llm.push(LLMError(f"down for {word}"), LLMError(f"down for {word}"))
    with pytest.raises(SessionFailed):
        mem.add([{"role": "user", "content": f"I moved to {word} city."}], user_id=who)
    llm.replies.clear()
    llm.push(f"The pet is called {word}.")
    assert word in mem.answer(f"What is my pet called, {word}?", user_id=who).text
    if lease:
        assert mem.store.acquire_lease(who, f"worker-of-{word}", 600)


def rows_of(mem: Memory) -> dict[str, list[str]]:
    """Every row of every table of the store, each as text (blobs as bytes decoded
    leniently, so that a marker stored as bytes is found too)."""
    store = mem.store
    out: dict[str, list[str]] = {}
    if type(store).__name__ == "SQLiteStore":
        db: sqlite3.Connection = store._db  # type: ignore[attr-defined]
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        assert {"sessions", "memories", "memories_fts_data", "llm_calls"} <= set(tables)
        for t in tables:
            rows = db.execute(f'SELECT * FROM "{t}"').fetchall()
            out[t] = [" | ".join(_text(v) for v in tuple(r)) for r in rows]
        return out
    rows = store._read(  # type: ignore[attr-defined]
        """SELECT table_name FROM information_schema.tables
           WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"""
    )
    tables = [r["table_name"] for r in rows]
    assert {"sessions", "memories", "search_versions", "schema_version"} <= set(tables)
    for t in tables:
        got = store._read(f'SELECT t::text AS row FROM "{t}" AS t')  # type: ignore[attr-defined]
        out[t] = [r["row"] for r in got]
    return out


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def rows_naming(tables: dict[str, list[str]], who: str) -> dict[str, int]:
    """Per table, the rows that hold one of the user's markers (any case)."""
    marks = (who.lower(), {**MARKERS, **TENANT_MARKERS}[who].lower())
    found = {t: sum(any(m in r.lower() for m in marks) for r in rows) for t, rows in tables.items()}
    return {t: n for t, n in found.items() if n}


def _segments(table: str) -> bool:
    """FTS5's index segments (a shadow table of the SQLite store)."""
    return table.endswith(("_fts_data", "_fts_idx"))


def tables_with_user_column(mem: Memory) -> set[str]:
    store = mem.store
    if type(store).__name__ == "SQLiteStore":
        db: sqlite3.Connection = store._db  # type: ignore[attr-defined]
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t
            for t in names
            if any(c[1] == "user_id" for c in db.execute(f'PRAGMA table_info("{t}")'))
        }
    rows = store._read(  # type: ignore[attr-defined]
        """SELECT DISTINCT table_name FROM information_schema.columns
           WHERE table_schema = current_schema() AND column_name = 'user_id'"""
    )
    return {r["table_name"] for r in rows}


def _store(backend: str, path: Path, embedder: Embedder) -> Store:
    if backend == "sqlite":
        from deltamem.store.sqlite import SQLiteStore

        return SQLiteStore(path, dim=embedder.dim, embedder_name=embedder.name)
    from pg import fresh_schema_dsn

    from deltamem.store.postgres import PostgresStore

    return PostgresStore(fresh_schema_dsn(), dim=embedder.dim, embedder_name=embedder.name)


@pytest.fixture
def filled(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    llm = ScriptedLLM()
    store = _store(request.param, tmp_path / "forget.db", embedder)
    mem = Memory(llm=llm, embedder=embedder, store=store, config=SESSION)
    for who in MARKERS:
        fill(mem, llm, who)
    try:
        yield mem
    finally:
        mem.close()


@pytest.mark.parametrize("filled", ["sqlite", "postgres"], indirect=True)
def test_forgetting_a_user_leaves_no_row_of_them_in_any_table(filled: Memory) -> None:
    mem = filled
    before = rows_of(mem)
    alice, bob = rows_naming(before, "zq-alice"), rows_naming(before, "zq-bob")
    # the fill reaches every table that names a user, so each is checked for real
    assert tables_with_user_column(mem) <= set(alice), set(tables_with_user_column(mem)) - set(
        alice
    )
    assert set(alice) == set(bob)
    bob_before = snapshot(mem, "zq-bob")
    for q in ("pet", "quokkazanzibar"):  # each user's banks are cached in this process
        mem.search(q, user_id="zq-alice")

    assert mem.reset("zq-alice") == 1  # the one live memory

    after = rows_of(mem)
    assert rows_naming(after, "zq-alice") == {}, "rows of the forgotten user are left"
    # the other user, row for row (FTS5's index segments are merged by the forget:
    # their rows change, what they index does not, which the snapshot's searches show)
    kept = {t: n for t, n in rows_naming(after, "zq-bob").items() if not _segments(t)}
    assert kept == {t: n for t, n in bob.items() if not _segments(t)}
    assert snapshot(mem, "zq-bob") == bob_before
    assert mem.search("quokkazanzibar pet", user_id="zq-alice") == []
    assert mem.users() == ["zq-bob"]
    assert ("zq-alice", "worker-of-quokkazanzibar") not in mem.store.list_leases()


@pytest.mark.parametrize("filled", ["sqlite", "postgres"], indirect=True)
def test_forget_counts_what_it_removed(filled: Memory) -> None:
    removed = filled.forget("zq-alice")
    assert removed == {
        "sessions": 3,
        "memories": 1,
        "history": 3,  # two adds and a delete
        "episodes": 4,  # s1's two turns, s2's, the failed session's one
        "calls": 4,  # s1's extraction, the failed session's two tries, the answer
        "leases": 1,
    }
    assert filled.forget("zq-alice") == dict.fromkeys(removed, 0)  # nothing left


def test_sqlite_file_keeps_no_byte_of_a_forgotten_user(tmp_path: Path, embedder: Embedder) -> None:
    """Beyond the tables: deleted rows are overwritten (secure_delete), FTS5's index
    segments merged, the WAL checkpointed, so the user's words are not in the file."""
    llm = ScriptedLLM()
    store = _store("sqlite", tmp_path / "bytes.db", embedder)
    mem = Memory(llm=llm, embedder=embedder, store=store, config=SESSION)
    for who in MARKERS:
        fill(mem, llm, who)
    mem.forget("zq-alice")
    mem.close()
    data = b"".join(p.read_bytes() for p in tmp_path.glob("bytes.db*"))
    assert b"quokkazanzibar" not in data.lower() and b"zq-alice" not in data
    assert b"wombatlisbon" in data.lower()


# --- the REST API ----------------------------------------------------------------------


def test_rest_user_delete_says_what_it_removed(tmp_path: Path, embedder: Embedder) -> None:
    from fastapi.testclient import TestClient

    from deltamem.server.app import create_app
    from deltamem.server.config import WorkerSettings

    llm = ScriptedLLM()
    store = _store("sqlite", tmp_path / "api.db", embedder)
    mem = Memory(llm=llm, embedder=embedder, store=store, config=SESSION)
    key = "key-of-tenant-zq-0123456789"
    for who in TENANT_MARKERS:  # a held lease would keep the delete waiting: none
        fill(mem, llm, who, lease=False)
    app = create_app(
        mem,
        {key: "zq"},
        worker_settings=WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0),
        start_worker=False,
    )
    with TestClient(app) as client:
        r = client.delete("/v1/users/alice", headers={"X-API-Key": key})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["user_id"] == "alice" and body["removed_memories"] == 1
        assert body["removed"] == {
            "sessions": 3,
            "memories": 1,
            "history": 3,
            "episodes": 4,
            "calls": 4,
            "leases": 1,  # the lease the delete itself held while it worked
        }
        assert client.delete("/v1/users/alice", headers={"X-API-Key": key}).status_code == 404
    assert mem.users() == ["zq:bob"]
    assert rows_naming(rows_of(mem), "zq:alice") == {}
    mem.close()
