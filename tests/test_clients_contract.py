"""One contract, four front doors: `Memory`, `AsyncMemory`, `Client` and `AsyncClient`
(the last two against a real uvicorn server on loopback) answer the same calls with
the same return types and raise the same errors.

A scripted LLM stands in for the model (one memory per ``codeword=X`` of a session);
the embedder and SQLite are real.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fakes import SESSION, ScriptedLLM

from deltamem import (
    AddResult,
    Answer,
    AsyncClient,
    AsyncMemory,
    Client,
    HistoryEntry,
    InvalidEdit,
    InvalidSession,
    Job,
    Memory,
    MemoryItem,
    SearchHit,
    SessionRecord,
    Version,
)
from deltamem.client import Unauthorized
from deltamem.embed import Embedder
from deltamem.llm.base import CallRecord
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.store.sqlite import SQLiteStore

KEY = "contract-key-0123456789"
FAST = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)
KINDS = ["memory", "async_memory", "client", "async_client"]
WAITS = ("add", "retry", "process_pending", "replay")  # queued by the service


def responder(messages: list[dict[str, str]]) -> Any:
    prompt = messages[-1]["content"]
    if not messages[0]["content"].startswith("You answer questions"):
        convo = prompt.split("Conversation", 1)[1]
        words = dict.fromkeys(re.findall(r"codeword=(\w+)", convo))
        return {
            "operations": [
                {"op": "add", "type": "persona", "content": f"The user's codeword is {w}."}
                for w in words
            ]
        }
    return "Known: " + " ".join(dict.fromkeys(re.findall(r"codeword(?: is |=)(\w+)", prompt)))


def convo(*words: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Note codeword={w} please."} for w in words] + [
        {"role": "assistant", "content": "Noted."}
    ]


class Door:
    """A front door driven synchronously: coroutines run on the door's own loop, and
    the service's queued calls wait for their jobs (what `Memory` does inline)."""

    def __init__(self, target: Any, remote: bool, llm: ScriptedLLM, memory: Memory) -> None:
        self.target, self.remote, self.llm, self.memory = target, remote, llm, memory
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.remote and name in WAITS:
                kwargs.setdefault("wait", True)
            out = fn(*args, **kwargs)
            return self.loop.run_until_complete(out) if asyncio.iscoroutine(out) else out

        return call


def serve(memory: Memory, keys: dict[str, str] | None = None) -> tuple[str, Callable[[], None]]:
    """The REST app on a free loopback port, in a thread; (url, stop)."""
    app = create_app(memory, keys or {KEY: "acme"}, worker_settings=FAST)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


@pytest.fixture(params=KINDS)
def door(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Door]:
    llm = ScriptedLLM(default=responder)
    store = SQLiteStore(tmp_path / "m.db", dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=llm, embedder=embedder, store=store, config=SESSION)
    kind: str = request.param
    stop: Callable[[], None] | None = None
    if kind == "memory":
        target: Any = mem
    elif kind == "async_memory":
        target = AsyncMemory(memory=mem)
    else:
        url, stop = serve(mem)
        cls = Client if kind == "client" else AsyncClient
        target = cls(url, KEY, poll_interval=0.02, wait_timeout=20)
    d = Door(target, remote=kind.endswith("client"), llm=llm, memory=mem)
    try:
        yield d
    finally:
        if kind != "memory":
            d.close()
        if stop is not None:
            stop()
        d.loop.close()
        mem.close()


def test_add_search_get_all_history_delete(door: Door) -> None:
    res = door.add(convo("apple", "pear"), user_id="martin", session_id="s1")
    assert isinstance(res, AddResult) and res.status == "applied" and not res.already_applied
    assert sorted(o.content or "" for o in res.applied) == [
        "The user's codeword is apple.",
        "The user's codeword is pear.",
    ]
    again = door.add(convo("apple", "pear"), user_id="martin", session_id="s1")
    assert again.already_applied and again.operations == res.operations

    hits = door.search("apple codeword", user_id="martin")
    assert hits and all(isinstance(h, SearchHit) for h in hits)
    facts = [h for h in hits if h.kind == "fact"]
    assert "apple" in facts[0].memory.content and facts[0].memory.user_id == "martin"
    assert any(h.kind == "episode" for h in hits)
    assert all(h.kind == "fact" for h in door.search("apple", user_id="martin", tiers="facts"))

    items = door.get_all(user_id="martin")
    assert len(items) == 2 and all(isinstance(m, MemoryItem) for m in items)
    assert door.get_all(user_id="martin", filters={"session_id": "s2"}) == []
    assert door.get_all(user_id="nobody") == []
    first = items[0]
    got = door.get(first.id)
    assert isinstance(got, MemoryItem) and got.content == first.content
    assert [m.id for m in door.session_memories("s1", "martin")] == [m.id for m in items]
    assert door.session_operations("s1", user_id="martin") == res.operations
    assert door.session_operations("zz", user_id="martin") == []
    [entry] = door.history(first.id)
    assert isinstance(entry, HistoryEntry) and (entry.op, entry.session_id) == ("add", "s1")

    ans = door.answer("What is the codeword?", user_id="martin")
    assert isinstance(ans, Answer) and "apple" in ans.text and ans.memories

    assert door.delete(first.id) is True
    assert door.get(first.id) is None
    assert [h.op for h in door.history(first.id)] == ["add", "delete"]
    assert door.delete(first.id) is False
    assert [m.id for m in door.get_all(user_id="martin")] == [items[1].id]
    assert door.get("no-such-memory") is None
    assert door.history("no-such-memory") == []

    assert door.reset("martin") == 1
    assert door.get_all(user_id="martin") == [] and door.search("apple", user_id="martin") == []


def test_infer_false_stores_verbatim_then_process(door: Door) -> None:
    res = door.add(convo("plum"), user_id="ana", session_id="v1", infer=False)
    assert isinstance(res, AddResult) and (res.status, res.operations) == ("deferred", [])
    assert door.llm.requests == []  # no LLM call
    assert door.get_all(user_id="ana") == []
    hits = door.search("codeword plum", user_id="ana")
    assert hits and {h.kind for h in hits} == {"episode"}
    assert "codeword=plum" in hits[0].memory.content
    # a later session with inference does not take the deferred one with it
    door.add(convo("fig"), user_id="ana", session_id="v2")
    assert [m.content for m in door.get_all(user_id="ana")] == ["The user's codeword is fig."]

    done = door.process_pending("ana")
    assert [(r.session_id, r.status) for r in done] == [("v1", "applied")]
    assert sorted(m.content for m in door.get_all(user_id="ana")) == [
        "The user's codeword is fig.",
        "The user's codeword is plum.",
    ]
    assert door.process_pending("ana") == []


def test_retry_of_a_deferred_session_and_of_an_unknown_one(door: Door) -> None:
    door.add(convo("kiwi"), user_id="bo", session_id="r1", infer=False)
    res = door.retry("r1", user_id="bo")
    assert res.status == "applied" and [o.content for o in res.applied] == [
        "The user's codeword is kiwi."
    ]
    with pytest.raises(KeyError):
        door.retry("nope", user_id="bo")


@pytest.mark.parametrize(
    "ids",
    [
        {"user_id": "a/b"},
        {"user_id": "ok", "session_id": "s\n1"},
        {"user_id": "ok", "agent_id": ""},
    ],
)
def test_an_invalid_id_is_rejected_the_same_way(door: Door, ids: dict[str, str]) -> None:
    with pytest.raises(InvalidSession):
        door.add(convo("x"), **ids)
    with pytest.raises(InvalidSession):
        door.add([], user_id="ok")  # no messages
    assert door.memory.store.list_sessions() == []


def test_edit_then_timeline_shows_the_persons_version(door: Door) -> None:
    door.add(convo("apple"), user_id="martin", session_id="s1")
    [mem] = door.get_all(user_id="martin")
    edited = door.edit(mem.id, "  The user's codeword is mango.  ")
    assert isinstance(edited, MemoryItem)
    assert (edited.id, edited.content, edited.version) == (
        mem.id,
        "The user's codeword is mango.",
        mem.version + 1,
    )
    assert edited.user_id == "martin" and edited.session_id == mem.session_id
    assert door.get(mem.id) == edited
    # the same text again records nothing
    assert door.edit(mem.id, "The user's codeword is mango.") == edited

    added, by_hand = door.timeline(mem.id)
    assert isinstance(added, Version) and isinstance(by_hand, Version)
    assert (added.op, added.actor, added.session_id, added.turns) == ("add", "manager", "s1", [0])
    assert added.new_content == "The user's codeword is apple." and added.user_id == "martin"
    assert (by_hand.op, by_hand.actor, by_hand.session_id, by_hand.turns) == (
        "update",
        "person",
        None,
        [],
    )
    assert (by_hand.old_content, by_hand.new_content) == (
        "The user's codeword is apple.",
        "The user's codeword is mango.",
    )
    assert [(h.op, h.actor) for h in door.history(mem.id)] == [
        ("add", "manager"),
        ("update", "person"),
    ]
    # the application may edit too, and says so
    assert door.edit(mem.id, "The user's codeword is kiwi.", actor="api") is not None
    assert door.timeline(mem.id)[-1].actor == "api"

    for bad in ("", "   ", "x" * 501, "bell\x07"):
        with pytest.raises(InvalidEdit):
            door.edit(mem.id, bad)
    assert door.get(mem.id).content == "The user's codeword is kiwi."  # type: ignore[union-attr]
    assert door.edit("no-such-memory", "Anything.") is None
    assert door.timeline("no-such-memory") == []

    assert door.delete(mem.id, actor="person") is True
    assert [(v.op, v.actor) for v in door.timeline(mem.id)][-1] == ("delete", "person")
    assert door.delete(mem.id, actor="person") is False
    assert door.edit(mem.id, "Too late.") is None


def test_sessions_session_and_its_llm_calls(door: Door) -> None:
    door.add(convo("apple"), user_id="martin", session_id="s1")
    door.add(convo("plum"), user_id="ana", session_id="v1", infer=False)
    door.add(convo("fig"), user_id="bo", session_id="b1", agent_id="coach")

    rec = door.session("s1", user_id="martin")
    assert isinstance(rec, SessionRecord)
    assert (rec.user_id, rec.session_id, rec.agent_id, rec.status) == (
        "martin",
        "s1",
        None,
        "applied",
    )
    assert [m.content for m in rec.messages] == [m["content"] for m in convo("apple")]
    assert rec.error is None and rec.content_hash
    assert door.session("nope", user_id="martin") is None
    assert door.session("s1", user_id="ana") is None
    assert door.session("b1", user_id="bo") is None  # it is the agent's
    coach = door.session("b1", user_id="bo", agent_id="coach")
    assert coach is not None and coach.agent_id == "coach"

    every = door.sessions()
    assert all(isinstance(r, SessionRecord) for r in every)
    assert [(r.user_id, r.session_id) for r in every] == [
        ("martin", "s1"),
        ("ana", "v1"),
        ("bo", "b1"),
    ]
    assert [r.session_id for r in door.sessions("martin")] == ["s1"]
    assert [(r.session_id, r.status) for r in door.sessions(status="deferred")] == [
        ("v1", "deferred")
    ]
    assert door.sessions("martin", status="deferred") == []
    assert door.sessions("nobody") == []

    calls = door.session_calls("s1", user_id="martin")
    assert calls and all(isinstance(c, CallRecord) for c in calls)
    assert {(c.user_id, c.session_id, c.agent_id, c.ok) for c in calls} == {
        ("martin", "s1", None, True)
    }
    assert any("codeword is apple" in (c.reply or "") for c in calls)
    assert all(c.purpose and c.prompt_tokens > 0 for c in calls)
    assert door.session_calls("v1", user_id="ana") == []  # stored verbatim: no LLM call
    assert door.session_calls("nope", user_id="martin") == []
    assert door.session_calls("b1", user_id="bo", agent_id="coach")

    assert door.users() == ["ana", "bo", "martin"]
    assert door.users("m") == ["martin"]
    assert door.users("zz") == []


KEY_B = "contract-key-of-globex-0123"


def test_another_tenants_key_gets_404_on_every_inspect_route_and_changes_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    llm = ScriptedLLM(default=responder)
    store = SQLiteStore(tmp_path / "t.db", dim=embedder.dim, embedder_name=embedder.name)
    with Memory(llm=llm, embedder=embedder, store=store, config=SESSION) as mem:
        url, stop = serve(mem, {KEY: "acme", KEY_B: "globex"})
        try:
            with Client(url, KEY, poll_interval=0.02) as acme, Client(url, KEY_B) as globex:
                acme.add(convo("apple"), user_id="martin", session_id="s1", wait=True)
                [fact] = acme.get_all(user_id="martin")
                acme.edit(fact.id, "The user's codeword is mango.")
                before = (acme.timeline(fact.id), acme.get(fact.id), mem.store.list_sessions())

                # through the client: what Memory answers for something it does not hold
                assert globex.timeline(fact.id) == []
                assert globex.edit(fact.id, "Hijacked.") is None
                assert globex.delete(fact.id, actor="person") is False
                assert globex.session("s1", user_id="martin") is None
                assert globex.sessions("martin") == [] and globex.sessions() == []
                assert globex.session_calls("s1", user_id="martin") == []
                assert globex.users() == [] and globex.users("m") == []

                # on the wire: 404 (never 403), a problem, whoever's id is named
                mid = fact.id
                for params in ({}, {"user_id": "martin"}):
                    routes = [
                        ("GET", f"/v1/memories/{mid}/timeline", params, None),
                        ("PATCH", f"/v1/memories/{mid}", params, {"content": "Hijacked."}),
                        ("DELETE", f"/v1/memories/{mid}", {**params, "actor": "person"}, None),
                        ("GET", "/v1/sessions/s1", {"user_id": "martin"}, None),
                        ("GET", "/v1/sessions/s1/calls", {"user_id": "martin"}, None),
                        ("GET", "/v1/sessions", {"user_id": "martin"}, None),
                    ]
                    for method, path, query, body in routes:
                        r = httpx.request(
                            method,
                            url + path,
                            params=query,
                            json=body,
                            headers={"Authorization": f"Bearer {KEY_B}"},
                        )
                        assert r.status_code == 404, (method, path, r.text)
                        assert r.headers["content-type"].startswith("application/problem+json")
                        assert "apple" not in r.text and "mango" not in r.text
                r = httpx.get(url + "/v1/users", headers={"X-API-Key": KEY_B})
                assert r.status_code == 200 and r.json() == {"count": 0, "users": []}
                r = httpx.get(url + "/v1/sessions", headers={"X-API-Key": KEY_B})
                assert r.status_code == 200 and r.json()["sessions"] == []

                after = (acme.timeline(fact.id), acme.get(fact.id), mem.store.list_sessions())
                assert after == before
                assert acme.users() == ["martin"]
                assert [v.op for v in acme.timeline(fact.id)] == ["add", "update"]
        finally:
            stop()


def test_client_add_returns_the_job_without_waiting(tmp_path: Path, embedder: Embedder) -> None:
    llm = ScriptedLLM(default=responder)
    store = SQLiteStore(tmp_path / "j.db", dim=embedder.dim, embedder_name=embedder.name)
    with Memory(llm=llm, embedder=embedder, store=store, config=SESSION) as mem:
        url, stop = serve(mem)
        try:
            with Client(url, KEY, poll_interval=0.02) as client:
                job = client.add(convo("lime"), user_id="u", session_id="j1")
                assert isinstance(job, Job) and job.session_id == "j1"
                done = client.wait(job.job_id)
                assert done.status == "applied" and len(done.applied) == 1
                with pytest.raises(Unauthorized):
                    Client(url, "wrong-key").get_all(user_id="u")
        finally:
            stop()
