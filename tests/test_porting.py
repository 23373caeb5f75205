"""Export and import of a user (deltamem/porting.py): a round trip gives the same
memories, histories, session log, episodes and search results, on SQLite, on
PostgreSQL, and from one to the other and back; a second import changes nothing;
a file of another format or version, or a bad line, is refused before anything is
written.

A scripted LLM stands in for the model; the embedder and the stores are real.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import SESSION, ScriptedLLM, add, ops, update

from deltamem.embed import Embedder
from deltamem.llm.base import LLMError
from deltamem.memory import Memory, SessionFailed
from deltamem.porting import FORMAT, VERSION, ExportFormatError, parse_export
from deltamem.store.base import SessionConflict, Store
from deltamem.store.users import users_of

QUERIES = ["Where does Alice work?", "beagle Rufus", "sister in Oslo", "moving to Lisbon"]

MakeMemory = Callable[..., Memory]


def _store(backend: str, path: Path, embedder: Embedder) -> Store:
    if backend == "sqlite":
        from deltamem.store.sqlite import SQLiteStore

        return SQLiteStore(path, dim=embedder.dim, embedder_name=embedder.name)
    from pg import fresh_schema_dsn

    from deltamem.store.postgres import PostgresStore

    return PostgresStore(fresh_schema_dsn(), dim=embedder.dim, embedder_name=embedder.name)


@pytest.fixture
def memory_on(tmp_path: Path, embedder: Embedder) -> Iterator[MakeMemory]:
    """A Memory on a new empty store of a backend, with a scripted LLM."""
    made: list[Memory] = []

    def make(backend: str, llm: ScriptedLLM | None = None, emb: Embedder | None = None) -> Memory:
        emb = emb or embedder
        store = _store(backend, tmp_path / f"m{len(made)}.db", emb)
        mem = Memory(llm=llm or ScriptedLLM(), embedder=emb, store=store, config=SESSION)
        made.append(mem)
        return mem

    yield make
    for m in made:
        m.close()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def fill(mem: Memory, llm: ScriptedLLM, who: str = "alice") -> None:
    """A user with every kind of thing a store holds: applied sessions (adds and an
    update), another agent's session, a hand edit, a deleted memory, a deferred
    session, a failed one."""
    llm.push(ops(add("Alice works at Brightloop."), add("Alice adopted a beagle named Rufus.")))
    mem.add(
        [user("I work at Brightloop. Also, I adopted a beagle named Rufus."), bot("Lovely!")],
        user_id=who,
        session_id="s1",
        timestamp="2025-01-01T09:00:00+00:00",
    )
    llm.push(ops(update("m1", "Alice works at Brightloop as a lead designer.")))
    mem.add(
        [user("I got promoted to lead designer at Brightloop!"), bot("Congrats!")],
        user_id=who,
        session_id="s2",
        timestamp="2025-06-01T09:00:00+00:00",
    )
    llm.push(ops(add("Alice's sister Mia lives in Oslo.", "relationship")))
    mem.add(
        [user("My sister Mia lives in Oslo.")],
        user_id=who,
        session_id="s3",
        agent_id="bot",
        timestamp="2025-07-01T09:00:00+00:00",
    )
    llm.push(ops(add("Alice drinks green tea every morning.")))
    mem.add(
        [user("I drink green tea every morning.")],
        user_id=who,
        session_id="s4",
        timestamp="2025-07-02T09:00:00+00:00",
    )
    by_content = {m.content: m for m in mem.get_all(user_id=who)}
    dog = by_content["Alice adopted a beagle named Rufus."]
    mem.edit(dog.id, "Alice adopted a beagle named Rufus in 2024.")
    mem.delete(by_content["Alice drinks green tea every morning."].id, actor="person")
    mem.add(
        [user("I am thinking of moving to Lisbon next year.")],
        user_id=who,
        session_id="s5",
        timestamp="2025-08-01T09:00:00+00:00",
        infer=False,
    )
    llm.push(LLMError("the model is down"), LLMError("the model is down"))
    with pytest.raises(SessionFailed):
        mem.add(
            [user("My favourite film is Alien.")],
            user_id=who,
            session_id="s6",
            timestamp="2025-09-01T09:00:00+00:00",
        )
    llm.replies.clear()


def snapshot(mem: Memory, who: str = "alice", *, search: bool = True) -> dict[str, Any]:
    """What a user of the library can read of a user's memory."""
    data = users_of(mem.store)
    history = data.user_history(who)
    ids = list(dict.fromkeys(h.memory_id for h in history))
    snap: dict[str, Any] = {
        "memories": [m.model_dump() for m in mem.get_all(user_id=who)],
        "history": {i: [h.model_dump() for h in mem.history(i)] for i in ids},
        "sessions": [
            (
                r.model_dump(exclude={"seq"}),
                [
                    o.model_dump()
                    for o in mem.session_operations(r.session_id, user_id=who, agent_id=r.agent_id)
                ],
            )
            for r in mem.sessions(who)
        ],
        "episodes": [e.model_dump() for e in data.user_episodes(who)],
    }
    if search:
        snap["search"] = {
            q: [
                (h.kind, h.memory.id, h.memory.content, round(h.score, 4))
                for h in mem.search(q, user_id=who, limit=10)
            ]
            for q in QUERIES
        }
    return snap


def test_filled_user_has_every_kind_of_record(memory_on: MakeMemory) -> None:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    snap = snapshot(mem)
    statuses = [s[0]["status"] for s in snap["sessions"]]
    assert statuses == ["applied", "applied", "applied", "applied", "deferred", "failed"]
    assert len(snap["memories"]) == 3
    assert len(snap["history"]) == 4  # one deleted, its history kept
    actors = {h["actor"] for hs in snap["history"].values() for h in hs}
    assert actors == {"manager", "person"}
    assert snap["episodes"] and all(snap["search"].values())


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_round_trip_is_the_same_memory(backend: str, memory_on: MakeMemory, tmp_path: Path) -> None:
    llm = ScriptedLLM()
    source = memory_on(backend, llm)
    fill(source, llm)
    path = tmp_path / "alice.jsonl"
    wrote = source.export_user("alice", path)
    assert (wrote.sessions, wrote.memories) == (6, 4)

    target = memory_on(backend)
    got = target.import_user(path)
    assert (got.sessions, got.memories, got.episodes) == (6, 4, wrote.episodes)
    assert snapshot(target) == snapshot(source)

    # idempotent: a second import adds nothing and changes nothing
    again = target.import_user(path)
    assert (again.sessions, again.memories, again.episodes) == (0, 0, 0)
    assert (again.skipped_sessions, again.skipped_memories) == (6, 4)
    assert snapshot(target) == snapshot(source)
    assert target.llm is not None and not target.llm.requests  # type: ignore[attr-defined]


def test_sqlite_to_postgres_and_back(memory_on: MakeMemory, tmp_path: Path) -> None:
    llm = ScriptedLLM()
    source = memory_on("sqlite", llm)
    fill(source, llm)
    source.export_user("alice", tmp_path / "a.jsonl")

    pg = memory_on("postgres")
    pg.import_user(tmp_path / "a.jsonl")
    # the same memory; search ranks keywords its own way on PostgreSQL
    assert snapshot(pg, search=False) == snapshot(source, search=False)
    pg.export_user("alice", tmp_path / "b.jsonl")

    back = memory_on("sqlite")
    back.import_user(tmp_path / "b.jsonl")
    assert snapshot(back) == snapshot(source)


def test_the_file_format(memory_on: MakeMemory, embedder: Embedder) -> None:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    fill(mem, llm, who="bob")  # not in alice's file
    buf = io.StringIO()
    mem.export_user("alice", buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    head, *records, end = lines
    assert head["format"] == FORMAT and head["version"] == VERSION == 1
    assert head["user_id"] == "alice" and head["exported_at"]
    assert head["embedder"] == {"name": embedder.name, "dim": embedder.dim}
    kinds = [r["kind"] for r in records]
    assert kinds == sorted(kinds, key=["session", "memory", "episode"].index)  # grouped
    assert end == {
        "kind": "end",
        "counts": {"sessions": 6, "memories": 4, "episodes": kinds.count("episode")},
    }
    text = buf.getvalue()
    assert "bob" not in text and "embedding" not in text  # one user's, no vectors
    session = next(r for r in records if r["kind"] == "session" and r["session_id"] == "s2")
    assert session["messages"][0] == {
        "role": "user",
        "content": "I got promoted to lead designer at Brightloop!",
        "timestamp": None,
        "name": None,
    }
    assert session["status"] == "applied" and session["operations"][0]["op"] == "update"
    memory = next(
        r
        for r in records
        if r["kind"] == "memory" and r["history"][-1]["actor"] == "person" and not r["deleted"]
    )
    assert memory["session_id"] == "s1" and memory["version"] == 2
    assert [h["op"] for h in memory["history"]] == ["add", "update"]
    assert [h["session_id"] for h in memory["history"]] == ["s1", None]
    deleted = next(r for r in records if r["kind"] == "memory" and r["deleted"])
    assert [h["op"] for h in deleted["history"]] == ["add", "delete"]


def test_import_as_another_user_beside_the_original(memory_on: MakeMemory, tmp_path: Path) -> None:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    before = snapshot(mem)
    mem.export_user("alice", tmp_path / "a.jsonl")
    got = mem.import_user(tmp_path / "a.jsonl", user_id="carol")
    assert (got.sessions, got.memories) == (6, 4)
    assert snapshot(mem) == before  # the original is untouched
    copy = snapshot(mem, "carol")
    assert [m["content"] for m in copy["memories"]] == [m["content"] for m in before["memories"]]
    assert not {m["id"] for m in copy["memories"]} & {m["id"] for m in before["memories"]}
    # operations name the copy's memory ids
    applied = [o for _, o_list in copy["sessions"] for o in o_list if o["memory_id"]]
    assert applied and all(o["memory_id"] in copy["history"] for o in applied)
    again = mem.import_user(tmp_path / "a.jsonl", user_id="carol")
    assert (again.sessions, again.memories) == (0, 0)
    assert snapshot(mem, "carol") == copy


class SmallEmbedder(Embedder):
    """Another embedder (another dimension): vectors from a hash of the text."""

    name = "small-hash"
    dim = 32

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def test_import_embeds_with_the_targets_embedder(memory_on: MakeMemory, tmp_path: Path) -> None:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    mem.export_user("alice", tmp_path / "a.jsonl")
    other = memory_on("sqlite", emb=SmallEmbedder())
    other.import_user(tmp_path / "a.jsonl")
    assert snapshot(other, search=False) == snapshot(mem, search=False)
    hits = other.search("beagle Rufus", user_id="alice", tiers="facts")
    assert hits[0].memory.content == "Alice adopted a beagle named Rufus in 2024."


def test_a_session_that_differs_is_a_conflict(memory_on: MakeMemory, tmp_path: Path) -> None:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    mem.export_user("alice", tmp_path / "a.jsonl")
    other = memory_on("sqlite")
    other.add([user("Something else entirely.")], user_id="alice", session_id="s1", infer=False)
    with pytest.raises(SessionConflict, match="s1"):
        other.import_user(tmp_path / "a.jsonl")


# --- refused files -------------------------------------------------------------------
def _lines(mem: Memory) -> list[str]:
    buf = io.StringIO()
    mem.export_user("alice", buf)
    return buf.getvalue().splitlines(keepends=True)


@pytest.fixture
def exported(memory_on: MakeMemory) -> list[str]:
    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    return _lines(mem)


def _refused(memory_on: MakeMemory, tmp_path: Path, lines: list[str], match: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    target = memory_on("sqlite")
    with pytest.raises(ExportFormatError, match=match):
        target.import_user(path)
    assert target.sessions() == [] and target.users() == []  # nothing written


def test_refuses_another_format(memory_on: MakeMemory, tmp_path: Path, exported: list[str]) -> None:
    head = json.loads(exported[0])
    bad = [json.dumps({**head, "format": "mem0-dump"}) + "\n", *exported[1:]]
    _refused(memory_on, tmp_path, bad, "line 1: not a deltamem export")


def test_refuses_another_version(
    memory_on: MakeMemory, tmp_path: Path, exported: list[str]
) -> None:
    head = json.loads(exported[0])
    bad = [json.dumps({**head, "version": 2}) + "\n", *exported[1:]]
    _refused(memory_on, tmp_path, bad, "version 2 is not supported: this deltamem reads version 1")


def test_bad_json_names_its_line(
    memory_on: MakeMemory, tmp_path: Path, exported: list[str]
) -> None:
    bad = [*exported[:3], '{"kind": "memory", "id": \n', *exported[3:]]
    _refused(memory_on, tmp_path, bad, "line 4: not valid JSON")


def test_refuses_a_cut_file(memory_on: MakeMemory, tmp_path: Path, exported: list[str]) -> None:
    _refused(memory_on, tmp_path, exported[:-3], "without its end line")


def test_refuses_an_unknown_record(
    memory_on: MakeMemory, tmp_path: Path, exported: list[str]
) -> None:
    bad = [*exported[:2], '{"kind": "vector", "values": [1, 2]}\n', *exported[2:]]
    _refused(memory_on, tmp_path, bad, "line 3: unknown record kind 'vector'")


def test_refuses_a_bad_record(memory_on: MakeMemory, tmp_path: Path, exported: list[str]) -> None:
    rec = json.loads(exported[1])
    bad = [exported[0], json.dumps({**rec, "status": "lost"}) + "\n", *exported[2:]]
    _refused(memory_on, tmp_path, bad, "line 2: session record: status")


def test_refuses_an_empty_file(memory_on: MakeMemory, tmp_path: Path) -> None:
    _refused(memory_on, tmp_path, [], "empty")


def test_parse_reads_binary_files(exported: list[str]) -> None:
    parsed = parse_export(io.BytesIO("".join(exported).encode()))
    assert parsed.header.user_id == "alice" and len(parsed.sessions) == 6


# --- the command line ------------------------------------------------------------------
def test_cli_export_and_import(memory_on: MakeMemory, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deltamem.cli.main import app
    from deltamem.store.sqlite import SQLiteStore

    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm)
    before = snapshot(mem)
    assert isinstance(mem.store, SQLiteStore)
    src, dst, out = mem.store.path, tmp_path / "dst.db", tmp_path / "alice.jsonl"
    runner = CliRunner()

    def cli(db: str | Path, *args: str, **kw: Any) -> Any:
        return runner.invoke(app, ["--db", str(db), *args], **kw)

    res = cli(src, "export", "--user", "alice", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "exported 6 session(s), 4 memories" in res.stderr
    res = cli(src, "export", "--user", "alice")  # to standard output
    assert res.exit_code == 0 and res.stdout == out.read_text(encoding="utf-8").replace(
        json.loads(out.read_text().splitlines()[0])["exported_at"],
        json.loads(res.stdout.splitlines()[0])["exported_at"],
    )
    res = cli(src, "export", "--user", "nobody")
    assert res.exit_code == 1 and "nothing is stored for user 'nobody'" in res.stderr

    res = cli(dst, "import", str(out))
    assert res.exit_code == 0, res.output
    assert "imported 6 session(s), 4 memories" in res.stdout
    res = cli(dst, "import", "-", "--json", input=out.read_text(encoding="utf-8"))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["skipped_memories"] == 4  # the second import: nothing new
    with Memory(dst, llm=ScriptedLLM(), config=SESSION, embedder=mem.embedder) as back:
        assert snapshot(back) == before

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "deltamem-export", "version": 7}\n', encoding="utf-8")
    res = cli(dst, "import", str(bad))
    assert res.exit_code == 1 and "version 7 is not supported" in res.stderr


# --- the REST API ------------------------------------------------------------------------
KEY_A, KEY_B = "key-of-tenant-a-0123456789", "key-of-tenant-b-0123456789"
HA, HB = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}


def test_rest_export_and_import(memory_on: MakeMemory) -> None:
    from fastapi.testclient import TestClient

    from deltamem.server.app import create_app
    from deltamem.server.config import WorkerSettings

    llm = ScriptedLLM()
    mem = memory_on("sqlite", llm)
    fill(mem, llm, who="a:alice")  # tenant a's alice
    before = snapshot(mem, "a:alice")
    fast = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)
    app = create_app(mem, {KEY_A: "a", KEY_B: "b"}, worker_settings=fast)
    with TestClient(app) as client:
        r = client.get("/v1/users/alice/export", headers=HA)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/x-ndjson")
        assert 'filename="alice.jsonl"' in r.headers["content-disposition"]
        lines = r.text.splitlines()
        assert json.loads(lines[0])["user_id"] == "alice"  # as the caller names it
        assert "a:alice" not in r.text  # never the tenant scoping
        assert client.get("/v1/users/alice/export").status_code == 401
        assert client.get("/v1/users/alice/export", headers=HB).status_code == 404

        # into tenant b, as alice: the same memory, beside tenant a's
        send = {**HB, "content-type": "application/x-ndjson"}
        r = client.post("/v1/users/alice/import", content=r.content, headers=send)
        assert r.status_code == 200, r.text
        got = r.json()
        assert (got["sessions"], got["memories"], got["skipped_memories"]) == (6, 4, 0)
        assert client.app.state.worker.wait_idle(10)  # type: ignore[attr-defined]
        copy = snapshot(mem, "b:alice", search=False)
        assert [m["content"] for m in copy["memories"]] == [
            m["content"] for m in before["memories"]
        ]
        assert snapshot(mem, "a:alice") == before
        again = client.post("/v1/users/alice/import", content="\n".join(lines), headers=send)
        assert again.status_code == 200 and again.json()["memories"] == 0
        assert snapshot(mem, "b:alice", search=False) == copy

        bad = [lines[0], "{not json", *lines[1:]]
        r = client.post("/v1/users/bob/import", content="\n".join(bad), headers=send)
        assert r.status_code == 422 and "line 2: not valid JSON" in r.json()["detail"]
        r = client.post("/v1/users/bob/import", content="\n".join(lines), headers=HB)
        assert r.status_code == 415
        assert "b:bob" not in mem.users()  # nothing written


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_outdated_memory_travels_outdated(
    backend: str, memory_on: MakeMemory, tmp_path: Path
) -> None:
    llm = ScriptedLLM()
    source = memory_on(backend, llm)
    llm.push(ops(add("Alice works at Northwind Bank.")))
    source.add([user("I work at Northwind Bank.")], user_id="alice", session_id="s1",
               timestamp="2025-01-01T09:00:00+00:00")  # fmt: skip
    llm.push(ops(add("Alice left Northwind Bank.")))
    source.add([user("I left Northwind Bank.")], user_id="alice", session_id="s2",
               timestamp="2025-03-01T09:00:00+00:00")  # fmt: skip
    every = {"outdated": True}
    before = [m.model_dump() for m in source.get_all(user_id="alice", filters=every)]
    assert [m["invalid_at"] is not None for m in before] == [True, False]
    source.export_user("alice", tmp_path / "a.jsonl")
    target = memory_on(backend)
    target.import_user(tmp_path / "a.jsonl")
    assert [m.model_dump() for m in target.get_all(user_id="alice", filters=every)] == before
    assert [m.content for m in target.get_all(user_id="alice")] == ["Alice left Northwind Bank."]
