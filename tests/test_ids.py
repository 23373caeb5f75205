"""The id grammar (deltamem/ids.py), enforced alike at every entry and on both
backends: what it accepts, what it refuses and how (InvalidSession, 422, exit 2),
that a NUL never reaches PostgreSQL as a 500 or a DataError, and the property that
matters: every id a write accepts reaches every route that takes it (job, read,
history, session memories, filters, replay, delete) over REST, on both backends.
Sessions are applied straight through the store (`apply_logged`), not planned."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from fakes import ScriptedLLM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import pg_server_fixture
from typer.testing import CliRunner

from deltamem.cli.main import app as cli_app
from deltamem.embed import Embedder
from deltamem.ids import MAX_ID_CHARS, MAX_USER_ID_CHARS, check_id, id_fault
from deltamem.memory import InvalidSession, Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.server.scope import internal_user
from deltamem.store.base import PlannedWrite, Store

# the fake model answers with whole operation lists (the "session" strategy)
pytestmark = pytest.mark.usefixtures("session_manager_env")

KEY = "key-of-tenant-t-0123456789"
H = {"Authorization": f"Bearer {KEY}"}
SETTINGS = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)
_pg_server = pg_server_fixture()

ACCEPTED = [
    "u",
    "alice@example.com",
    "team:alice",
    "a b",
    " leading and trailing ",
    "...",
    ".hidden",
    "50%25",
    "what?#frag",
    "ünïcødé 用户 🙂",
    "back\\slash",
    "x" * MAX_ID_CHARS,
]
REFUSED = {
    "empty": ("", "is required"),
    "blank": ("  \t", "blank"),
    "NUL": ("a\x00b", "control character (U+0000)"),
    "newline": ("a\nb", "control character"),
    "DEL": ("a\x7fb", "control character"),
    "C1 control": ("a\x85b", "control character"),
    "lone surrogate": ("a\udc80b", "surrogate"),
    "slash": ("team/alice", "'/'"),
    "dot": (".", "cannot be '.'"),
    "dot dot": ("..", "cannot be '..'"),
    "too long": ("x" * (MAX_ID_CHARS + 1), "longer than 256"),
    "not a string": (7, "must be a string"),
}


@pytest.mark.parametrize("value", ACCEPTED)
def test_the_grammar_accepts(value: str) -> None:
    assert id_fault(value) is None
    assert check_id(value) == value


@pytest.mark.parametrize(("value", "fault"), REFUSED.values(), ids=list(REFUSED))
def test_the_grammar_refuses_naming_the_fault(value: Any, fault: str) -> None:
    assert fault in (id_fault(value) or "")


def test_a_library_user_id_has_room_for_a_tenant() -> None:
    assert id_fault("t" * 64 + ":" + "u" * MAX_ID_CHARS, MAX_USER_ID_CHARS) is None
    assert id_fault("u" * (MAX_USER_ID_CHARS + 1), MAX_USER_ID_CHARS) is not None


# --- the library, both backends ----------------------------------------------------------
def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def mem(store: Store, embedder: Embedder) -> Iterator[Memory]:
    llm = ScriptedLLM(default={"operations": [{"op": "add", "type": "event", "content": "x."}]})
    m = Memory(llm=llm, embedder=embedder, store=store)
    yield m


@pytest.mark.parametrize("field", ["user_id", "session_id", "agent_id"])
@pytest.mark.parametrize("bad", ["a\x00b", "team/alice", "..", "a\x1bb"])
def test_library_refuses_a_bad_id_with_invalid_session_on_both_backends(
    mem: Memory, field: str, bad: str
) -> None:
    kwargs: dict[str, Any] = {"user_id": "u", "session_id": "s1", field: bad}
    with pytest.raises(InvalidSession, match=field):
        mem.add([user("I keep bees.")], **kwargs)
    assert mem.store.list_sessions() == []


def apply_logged(mem: Memory, user_id: str, session_id: str, agent_id: str | None) -> None:
    """Apply a logged session with one memory straight through the store: no manager,
    so no vector search (which this suite's PostgreSQL cannot do on every CPU, see
    tests/pg.py); what is under test is how ids travel, not planning."""
    rec = mem.store.get_session(user_id, session_id, agent_id)
    assert rec is not None
    word = rec.messages[0].content.split("codeword=")[-1].split()[0]
    vec = np.zeros(mem.store.dim, dtype=np.float32)
    vec[0] = 1.0
    write = PlannedWrite("add", f"The codeword is {word}.", vec, memory_type="persona", turns=[0])
    mem.store.apply_session(rec, [write], [])


def test_library_reads_by_a_nul_id_find_nothing_on_both_backends(mem: Memory) -> None:
    mem.log_session([user("codeword=bees")], user_id="u", session_id="s1")
    apply_logged(mem, "u", "s1", None)
    nul = "a\x00b"
    assert mem.get(nul) is None
    assert mem.history(nul) == []
    assert mem.delete(nul) is False
    assert mem.session_memories(nul) == []
    assert mem.session_memories("s1", user_id=nul) == []
    assert mem.get_all(user_id=nul) == []
    assert mem.get_all(user_id="u", agent_id=nul) == []
    assert mem.search("bees", user_id=nul) == []
    assert mem.reset(nul) == 0
    with pytest.raises(KeyError):
        mem.retry(nul, user_id="u")
    assert len(mem.get_all(user_id="u")) == 1


# --- the REST API, both backends -----------------------------------------------------------
class Served:
    """The app served by uvicorn on a loopback port, in a thread: requests go over
    real HTTP, so a path is decoded once, as in production. (Starlette's TestClient
    decodes a path twice: ``%252F`` would reach the router as ``/``.)"""

    def __init__(self, app: Any) -> None:
        import socket
        import threading

        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def rest(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[httpx.Client, Memory]]:
    if request.param == "postgres":
        request.getfixturevalue("pg_server")
        from pg import fresh_schema_dsn

        from deltamem.store.postgres import PostgresStore

        store: Store = PostgresStore(fresh_schema_dsn(), dim=embedder.dim, embedder_name="t")
    else:
        from deltamem.store.sqlite import SQLiteStore

        path = tmp_path_factory.mktemp("ids") / "ids.db"
        store = SQLiteStore(path, dim=embedder.dim, embedder_name="t")
    mem = Memory(llm=ScriptedLLM(default={"operations": []}), embedder=embedder, store=store)
    served = Served(create_app(mem, {KEY: "t"}, start_worker=False, worker_settings=SETTINGS))
    try:
        yield served.client, mem
    finally:
        served.close()
        mem.close()


def p(value: str) -> str:
    """An id as one URL path segment: every reserved character percent-encoded."""
    return quote(value, safe="")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/memories/{bad}"),
        ("GET", "/v1/memories/{bad}/history"),
        ("DELETE", "/v1/memories/{bad}"),
        ("GET", "/v1/sessions/{bad}/memories?user_id=u"),
        ("GET", "/v1/memories?user_id={bad}"),
        ("GET", "/v1/memories?user_id=u&agent_id={bad}"),
        ("GET", "/v1/memories?user_id=u&session_id={bad}"),
        ("GET", "/v1/memories/abc?user_id={bad}"),
        ("POST", "/v1/users/{bad}/replay"),
    ],
)
@pytest.mark.parametrize("bad", ["\x00", "a\x00b", "a\x01", "..x\x7f"])
def test_a_control_character_in_a_path_or_query_id_is_a_422_on_both_backends(
    rest: tuple[httpx.Client, Memory], method: str, path: str, bad: str
) -> None:
    client, _ = rest
    r = client.request(method, path.format(bad=p(bad)), headers=H)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "control character" in r.json()["detail"]


@pytest.mark.parametrize("field", ["user_id", "session_id", "agent_id"])
@pytest.mark.parametrize("bad", ["team/alice", "a\x00b", ".."])
def test_an_id_that_could_not_be_reached_is_refused_at_write(
    rest: tuple[httpx.Client, Memory], field: str, bad: str
) -> None:
    client, mem = rest
    body = {"user_id": "u", "messages": [user("codeword=zz")], field: bad}
    r = client.post("/v1/sessions", json=body, headers=H)
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"]
    assert mem.store.list_sessions(status="pending") == []


# ids made of characters that mean something in a URL, a query or a shell (and a
# few letters), or of any characters (all of Unicode but surrogates)
URL_SPECIAL = "/.:%?#&=+;@ \\~!$'()*,[]ab"
ids = st.one_of(
    st.sampled_from([".", "..", "...", ".a", "a/b", "%2F", "%2e%2e", "?", "#", " "]),
    st.text(alphabet=URL_SPECIAL, min_size=1, max_size=12),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24),
).filter(lambda v: id_fault(v) is None)
COUNTER = {"n": 0}


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(user_id=ids, session_id=ids, agent_id=st.none() | ids)
def test_every_accepted_id_reaches_every_route_that_takes_it(
    rest: tuple[httpx.Client, Memory], user_id: str, session_id: str, agent_id: str | None
) -> None:
    client, mem = rest
    COUNTER["n"] += 1
    word = f"w{COUNTER['n']}"
    body: dict[str, Any] = {
        "user_id": user_id,
        "session_id": session_id,
        "messages": [user(f"Note codeword={word} please.")],
    }
    if agent_id is not None:
        body["agent_id"] = agent_id
    scoped = {"user_id": user_id, **({"agent_id": agent_id} if agent_id else {})}
    try:
        r = client.post("/v1/sessions", json=body, headers=H)
        assert r.status_code == 202, r.text
        job = r.json()["job_id"]
        internal = internal_user("t", user_id)
        apply_logged(mem, internal, session_id, agent_id)
        r = client.get(f"/v1/jobs/{p(job)}", headers=H)
        assert r.status_code == 200 and r.json()["status"] == "applied", r.text
        assert r.json()["user_id"] == user_id and r.json()["session_id"] == session_id

        listed = client.get("/v1/memories", params=scoped, headers=H)
        assert listed.status_code == 200, listed.text
        [m] = listed.json()["memories"]
        assert m["user_id"] == user_id and m["session_id"] == session_id
        assert m["content"] == f"The codeword is {word}."
        mid, q = m["id"], {"user_id": user_id}

        assert client.get(f"/v1/memories/{p(mid)}", params=q, headers=H).status_code == 200
        hist = client.get(f"/v1/memories/{p(mid)}/history", params=q, headers=H)
        assert hist.status_code == 200 and [h["op"] for h in hist.json()["history"]] == ["add"]
        assert hist.json()["history"][0]["session_id"] == session_id
        sm = client.get(f"/v1/sessions/{p(session_id)}/memories", params=q, headers=H)
        assert sm.status_code == 200, sm.text
        assert [x["id"] for x in sm.json()["memories"]] == [mid]
        filtered = client.get(
            "/v1/memories", params={**scoped, "session_id": session_id}, headers=H
        )
        assert [x["id"] for x in filtered.json()["memories"]] == [mid]

        replay = client.post(
            f"/v1/users/{p(user_id)}/replay",
            json={"agent_id": agent_id} if agent_id else None,
            headers=H,
        )
        assert replay.status_code == 202, replay.text
        assert replay.json()["removed_memories"] == 1 and replay.json()["jobs"] == [job]
        apply_logged(mem, internal, session_id, agent_id)
        [again] = client.get("/v1/memories", params=scoped, headers=H).json()["memories"]
        assert again["content"] == f"The codeword is {word}."

        gone = client.delete(f"/v1/memories/{p(again['id'])}", params=q, headers=H)
        assert gone.status_code == 204, gone.text
        assert client.get("/v1/memories", params=scoped, headers=H).json()["memories"] == []
    finally:
        mem.reset(internal_user("t", user_id))  # the next example may draw the same ids


# --- the command line and MCP ------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["history", "a/b"],
        ["delete", ".."],
        ["memories", "--user", "a\x1bb"],
        ["retry", "team/s1", "--user", "u"],
        ["sessions", "--user", "a\tb"],
    ],
)
def test_cli_refuses_a_bad_id_with_exit_code_2(tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(cli_app, ["--db", str(tmp_path / "x.db"), *args])
    assert res.exit_code == 2, res.output
    assert "Invalid value" in res.output
    assert not (tmp_path / "x.db").exists()  # refused before the store was opened


def test_cli_add_refuses_a_file_with_a_bad_id_before_logging_anything(tmp_path: Path) -> None:
    import json

    f = tmp_path / "s.jsonl"
    rows = [
        {"user_id": "u", "session_id": "ok", "messages": [user("hi")]},
        {"user_id": "u", "session_id": "team/s2", "messages": [user("hi")]},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    db = tmp_path / "x.db"
    res = CliRunner().invoke(cli_app, ["--db", str(db), "--llm", "tiny", "add", str(f)])
    assert res.exit_code == 2, res.output
    assert "session_id contains '/'" in res.output
    assert not db.exists()
