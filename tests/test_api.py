"""REST API: queued writes, jobs, tenant scoping, problem details, retries, replay.

A scripted LLM stands in for the model; the embedder and SQLite are real.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fakes import SESSION, ScriptedLLM
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from deltamem.embed import Embedder
from deltamem.llm.base import LLMError
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings, keys_or_generated, load_keys, parse_keys
from deltamem.server.scope import for_caller, internal_user, job_id, parse_job_id
from deltamem.store.sqlite import SQLiteStore

KEY_A = "key-of-tenant-a-0123456789"
KEY_B = "key-of-tenant-b-0123456789"
KEYS = {KEY_A: "a", KEY_B: "b"}
HA = {"Authorization": f"Bearer {KEY_A}"}
HB = {"X-API-Key": KEY_B}
FAST = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)


def responder(messages: list[dict[str, str]]) -> Any:
    """Manager calls: one memory per `codeword=X` the conversation holds. Answer
    calls: the codewords of the memories it was shown."""
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
    # facts say "codeword is X", conversation excerpts "codeword=X"
    return "Known: " + " ".join(dict.fromkeys(re.findall(r"codeword(?: is |=)(\w+)", prompt)))


def session(user: str, *words: str, sid: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "user_id": user,
        "timestamp": "2029-02-13T10:51:39",
        "messages": [{"role": "user", "content": f"Note codeword={w} please."} for w in words]
        # the reply names a codeword too: it is searchable as an episode of this user
        + [{"role": "assistant", "content": f"Noted codeword={words[0]}." if words else "Noted."}],
        **extra,
    }
    if sid is not None:
        body["session_id"] = sid
    return body


@pytest.fixture
def make_client(
    tmp_path: Path, embedder: Embedder
) -> Iterator[Callable[..., tuple[TestClient, Memory]]]:
    opened: list[tuple[TestClient, Memory]] = []

    def make(llm: ScriptedLLM | None = None, **kw: Any) -> tuple[TestClient, Memory]:
        store = SQLiteStore(
            tmp_path / f"api{len(opened)}.db", dim=embedder.dim, embedder_name=embedder.name
        )
        mem = Memory(
            llm=llm or ScriptedLLM(default=responder),
            embedder=embedder,
            store=store,
            config=SESSION,
        )
        kw.setdefault("worker_settings", FAST)
        raise_exc = kw.pop("raise_server_exceptions", True)
        client = TestClient(create_app(mem, KEYS, **kw), raise_server_exceptions=raise_exc)
        client.__enter__()
        opened.append((client, mem))
        return client, mem

    yield make
    for client, mem in opened:
        client.__exit__(None, None, None)
        mem.close()


@pytest.fixture
def api(make_client: Callable[..., tuple[TestClient, Memory]]) -> tuple[TestClient, Memory]:
    return make_client()


def wait_job(client: TestClient, job: str, headers: dict[str, str] = HA) -> dict[str, Any]:
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker.wait_idle(10)
    r = client.get(f"/v1/jobs/{job}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def is_problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    assert "Traceback" not in r.text
    return body


# --- the happy path ------------------------------------------------------------------------
def test_submit_returns_202_and_the_job_completes(api: tuple[TestClient, Memory]) -> None:
    client, _ = api
    r = client.post("/v1/sessions", json=session("martin", "apple", "pear", sid="s1"), headers=HA)
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] in ("pending", "running", "applied")
    assert job["job_id"] == job_id("martin", "s1")
    done = wait_job(client, job["job_id"])
    assert done["status"] == "applied" and done["error"] is None
    assert sorted(o["content"] for o in done["operations"]) == [
        "The user's codeword is apple.",
        "The user's codeword is pear.",
    ]

    listed = client.get("/v1/memories", params={"user_id": "martin"}, headers=HA).json()
    assert listed["count"] == 2 and {m["user_id"] for m in listed["memories"]} == {"martin"}
    hits = client.post(
        "/v1/search", json={"query": "apple codeword", "user_id": "martin"}, headers=HA
    ).json()["results"]
    facts = [h for h in hits if h["kind"] == "fact"]
    assert facts and "apple" in facts[0]["memory"]["content"]
    said = [h for h in hits if h["kind"] == "episode"]  # the raw turns are searched too
    assert said and said[0]["speaker"] in ("user", "assistant")
    assert "codeword=apple" in " ".join(h["memory"]["content"] for h in said)
    only_facts = client.post(
        "/v1/search",
        json={"query": "apple codeword", "user_id": "martin", "tiers": "facts"},
        headers=HA,
    ).json()["results"]
    assert {h["kind"] for h in only_facts} == {"fact"}
    mid = facts[0]["memory"]["id"]
    assert client.get(f"/v1/memories/{mid}", headers=HA).json()["id"] == mid
    hist = client.get(f"/v1/memories/{mid}/history", headers=HA).json()["history"]
    assert [h["op"] for h in hist] == ["add"] and hist[0]["session_id"] == "s1"
    assert "user_id" not in hist[0]
    sm = client.get("/v1/sessions/s1/memories", params={"user_id": "martin"}, headers=HA).json()
    assert len(sm["memories"]) == 2
    ans = client.post(
        "/v1/answer", json={"question": "What are the codewords?", "user_id": "martin"}, headers=HA
    ).json()
    assert "apple" in ans["answer"] and "pear" in ans["answer"]

    # filters
    none = client.get(
        "/v1/memories", params={"user_id": "martin", "since": "2030-01-01"}, headers=HA
    ).json()
    assert none["count"] == 0
    typed = client.get(
        "/v1/memories",
        params={"user_id": "martin", "memory_type": "persona", "limit": 1},
        headers=HA,
    ).json()
    assert typed["count"] == 1
    bad = client.get("/v1/memories", params={"user_id": "martin", "since": "soon"}, headers=HA)
    is_problem(bad, 422)

    # delete, then it is gone (and the deletion is in its history)
    assert client.delete(f"/v1/memories/{mid}", headers=HA).status_code == 204
    is_problem(client.get(f"/v1/memories/{mid}", headers=HA), 404)
    hist = client.get(f"/v1/memories/{mid}/history", headers=HA).json()["history"]
    assert [h["op"] for h in hist] == ["add", "delete"] and hist[1]["actor"] == "api"
    is_problem(client.delete(f"/v1/memories/{mid}", headers=HA), 404)


def test_resubmitting_a_session_is_idempotent_and_conflicts_are_409(
    api: tuple[TestClient, Memory],
) -> None:
    client, mem = api
    first = client.post("/v1/sessions", json=session("u", "kiwi", sid="s1"), headers=HA)
    wait_job(client, first.json()["job_id"])
    again = client.post("/v1/sessions", json=session("u", "kiwi", sid="s1"), headers=HA)
    assert again.status_code == 202 and again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["status"] == "applied"
    other = client.post("/v1/sessions", json=session("u", "lime", sid="s1"), headers=HA)
    body = is_problem(other, 409)
    # the ids the caller gave, not the store's tenant-scoped user id ('a:u')
    assert "session 's1' of user 'u' is already logged" in body["detail"]
    assert "a:u" not in body["detail"]
    # without a session id, the content names the session: same content, same job
    a = client.post("/v1/sessions", json=session("u", "fig"), headers=HA).json()
    b = client.post("/v1/sessions", json=session("u", "fig"), headers=HA).json()
    assert a["job_id"] == b["job_id"]
    wait_job(client, a["job_id"])
    assert mem.store.count(internal_user("a", "u")) == 2


def test_openapi_and_health_are_served(api: tuple[TestClient, Memory]) -> None:
    client, _ = api
    spec = client.get("/openapi.json").json()
    for path in (
        "/v1/sessions",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/retry",
        "/v1/memories",
        "/v1/memories/{memory_id}",
        "/v1/memories/{memory_id}/history",
        "/v1/sessions/{session_id}/memories",
        "/v1/search",
        "/v1/answer",
        "/v1/users/{user_id}/replay",
    ):
        assert path in spec["paths"], path
    assert client.get("/healthz").json()["status"] == "ok"


# --- authentication ------------------------------------------------------------------------
def test_requests_without_a_valid_key_are_401(api: tuple[TestClient, Memory]) -> None:
    client, mem = api
    body = session("u", "plum")
    is_problem(client.post("/v1/sessions", json=body), 401)
    r = client.post("/v1/sessions", json=body, headers={"Authorization": "Bearer nope"})
    assert is_problem(r, 401)["detail"] == "the API key is not valid"
    assert r.headers["www-authenticate"] == "Bearer"
    is_problem(
        client.get(
            "/v1/memories", params={"user_id": "u"}, headers={"Authorization": f"Basic {KEY_A}"}
        ),
        401,
    )
    # a malformed body from a stranger is still a 401, not a parse error
    is_problem(client.post("/v1/sessions", content=b"{nope"), 401)
    assert mem.store.list_sessions() == []
    assert client.post("/v1/sessions", json=body, headers=HB).status_code == 202


def test_keys_config() -> None:
    assert parse_keys("k1=acme, k2=globex\n# c\n") == {"k1": "acme", "k2": "globex"}
    with pytest.raises(ValueError):
        parse_keys("k1=bad:tenant")
    with pytest.raises(ValueError):
        parse_keys("justakey")
    assert load_keys({"k": "t"}) == {"k": "t"}


def test_a_busy_user_is_named_as_the_caller_named_them(
    make_client: Callable[..., tuple[TestClient, Memory]],
) -> None:
    from deltamem.server.lease import UserLease

    client, mem = make_client(worker_settings=WorkerSettings(poll_interval=0.05, lease_wait=0.2))
    first = client.post("/v1/sessions", json=session("u", "kiwi", sid="s1"), headers=HA)
    wait_job(client, first.json()["job_id"])
    holder = UserLease(mem.store, internal_user("a", "u"), "another-worker", ttl=30)
    assert holder.try_acquire()
    try:
        r = client.post("/v1/users/u/replay", headers=HA)
        detail = is_problem(r, 409)["detail"]
        assert detail.startswith("user 'u' is being processed") and "a:u" not in detail
        # forgetting the user does not wait for the worker: it cancels its job
        # (tests/test_api_jobs.py)
        assert client.delete("/v1/users/u", headers=HA).status_code == 200
    finally:
        holder.release()


def test_for_caller_writes_the_store_user_id_as_the_caller_gave_it() -> None:
    msg = "session 's1' of user 'a:b:c' is already logged"
    assert (
        for_caller(msg, internal_user("a", "b:c")) == "session 's1' of user 'b:c' is already logged"
    )
    assert for_caller(msg, None) == msg
    assert for_caller("user 'plain'", "plain") == "user 'plain'"  # not tenant-scoped: as is


def test_job_ids_round_trip() -> None:
    jid = job_id("ünïcode:user", "s 1?#%", "agent")
    assert parse_job_id(jid) == ("ünïcode:user", "s 1?#%", "agent")
    assert parse_job_id(job_id("u", "s")) == ("u", "s", None)
    # a job id can only name ids of the grammar (deltamem/ids.py)
    for bad in ("job_", "job_!!", "nope", "job_" + "A" * 10, job_id("u", "s/1")):
        with pytest.raises(ValueError):
            parse_job_id(bad)


# --- malformed input --------------------------------------------------------------------------
def test_bad_bodies_are_4xx_problems_and_nothing_is_written(
    make_client: Callable[..., tuple[TestClient, Memory]],
) -> None:
    client, mem = make_client(max_body_bytes=64 * 1024)

    def post(**kw: Any) -> httpx.Response:
        return client.post("/v1/sessions", **{"headers": HA, **kw})

    good = session("u", "x")

    is_problem(post(json={**good, "user_id": 5}), 422)
    is_problem(post(json={k: v for k, v in good.items() if k != "messages"}), 422)
    is_problem(post(json={**good, "messages": []}), 422)
    is_problem(post(json={**good, "messages": "hello"}), 422)
    is_problem(post(json={**good, "messages": [{"role": "robot", "content": "hi"}]}), 422)
    is_problem(post(json={**good, "messages": [{"role": "user", "content": "   "}]}), 422)
    is_problem(post(json={**good, "messages": [{"role": "user", "content": 7}]}), 422)
    is_problem(post(json={**good, "timestamp": "the day after tomorrow"}), 422)
    is_problem(post(json={**good, "user_id": "   "}), 422)
    is_problem(post(json={**good, "user_id": "bad\x00id"}), 422)
    is_problem(post(json={**good, "surprise": 1}), 422)
    is_problem(post(json=[good]), 422)
    is_problem(post(json=None), 422)
    # not JSON at all, and JSON that is not UTF-8
    body = is_problem(
        post(content=b"{not json", headers={**HA, "content-type": "application/json"}), 400
    )
    assert body["title"] == "Malformed JSON"
    raw = b'{"user_id": "u", "messages": [{"role": "user", "content": "caf\xe9 \xff\xfe"}]}'
    r = post(content=raw, headers={**HA, "content-type": "application/json"})
    assert "UTF-8" in is_problem(r, 400)["detail"]
    deep = b"[" * 20_000 + b"]" * 20_000
    is_problem(post(content=deep, headers={**HA, "content-type": "application/json"}), 400)
    # a body that is not declared JSON
    is_problem(post(content=json.dumps(good), headers={**HA, "content-type": "text/plain"}), 415)
    # a lone surrogate, escaped in valid JSON
    raw = b'{"user_id": "u", "messages": [{"role": "user", "content": "hi \\ud800 there"}]}'
    is_problem(post(content=raw, headers={**HA, "content-type": "application/json"}), 422)
    raw = b'{"user_id": "\\udfff", "messages": [{"role": "user", "content": "hi"}]}'
    is_problem(post(content=raw, headers={**HA, "content-type": "application/json"}), 422)
    # too many messages, under the byte limit: 413 too (a session over the size limits)
    many = {**good, "messages": [{"role": "user", "content": "a"}] * 2001}
    is_problem(post(json=many), 413)
    huge = {**good, "messages": [{"role": "user", "content": "word " * 4000}] * 10}
    is_problem(post(json=huge), 413)

    # 413 also without a Content-Length (chunked upload)
    def chunks() -> Iterator[bytes]:
        yield json.dumps(huge).encode()

    is_problem(post(content=chunks(), headers={**HA, "content-type": "application/json"}), 413)
    # bad search / answer / list requests
    is_problem(client.post("/v1/search", json={"user_id": "u"}, headers=HA), 422)
    is_problem(
        client.post("/v1/search", json={"query": "q", "user_id": "u", "limit": 0}, headers=HA), 422
    )
    is_problem(
        client.post(
            "/v1/search",
            json={"query": "q", "user_id": "u", "filters": {"since": "never"}},
            headers=HA,
        ),
        422,
    )
    is_problem(client.post("/v1/answer", json={"question": "", "user_id": "u"}, headers=HA), 422)
    is_problem(
        client.post(
            "/v1/answer", json={"question": "q", "user_id": "u", "asked_at": "someday"}, headers=HA
        ),
        422,
    )
    is_problem(client.get("/v1/memories", headers=HA), 422)
    is_problem(client.get("/v1/memories", params={"user_id": "u", "limit": -1}, headers=HA), 422)
    is_problem(
        client.get("/v1/memories", params={"user_id": "u", "memory_type": "x"}, headers=HA), 422
    )
    is_problem(client.get("/v1/jobs/not-a-job", headers=HA), 404)
    is_problem(client.get("/v1/nowhere", headers=HA), 404)

    assert mem.store.list_sessions() == []
    assert client.app.state.worker.wait_idle(5)  # type: ignore[attr-defined]
    assert mem.store.count(internal_user("a", "u")) == 0


def test_unexpected_errors_are_500_problems_without_internals(
    make_client: Callable[..., tuple[TestClient, Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, mem = make_client(raise_server_exceptions=False)

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("secret internal detail /etc/passwd")

    monkeypatch.setattr(mem, "search", boom)
    r = client.post("/v1/search", json={"query": "q", "user_id": "u"}, headers=HA)
    body = is_problem(r, 500)
    assert "secret" not in r.text and "passwd" not in r.text and body["reference"]


# --- failures, retries, replay ----------------------------------------------------------------
class Flaky:
    """A responder that fails (like a dead LLM server) while `down` is set."""

    def __init__(self) -> None:
        self.down = True

    def __call__(self, messages: list[dict[str, str]]) -> Any:
        if self.down:
            raise LLMError("connection refused by the LLM server")
        return responder(messages)


def test_failed_job_is_parked_then_retried_without_duplicates(
    make_client: Callable[..., tuple[TestClient, Memory]],
) -> None:
    flaky = Flaky()
    client, mem = make_client(ScriptedLLM(default=flaky, retries=0))
    job = client.post("/v1/sessions", json=session("u", "mango", sid="s1"), headers=HA).json()
    parked = wait_job(client, job["job_id"])
    assert parked["status"] == "failed"
    assert "connection refused" in parked["error"] and parked["attempts"] == 1
    # a parked job does not hold back the user's later sessions
    later = client.post("/v1/sessions", json=session("u", "guava", sid="s2"), headers=HA).json()
    assert wait_job(client, later["job_id"])["status"] == "failed"  # LLM still down

    flaky.down = False
    r = client.post(f"/v1/jobs/{job['job_id']}/retry", headers=HA)
    assert r.status_code == 202 and r.json()["status"] in ("pending", "running", "applied")
    assert wait_job(client, job["job_id"])["status"] == "applied"
    client.post(f"/v1/jobs/{later['job_id']}/retry", headers=HA)
    assert wait_job(client, later["job_id"])["status"] == "applied"
    # retrying an applied job again changes nothing
    for _ in range(2):
        again = client.post(f"/v1/jobs/{job['job_id']}/retry", headers=HA)
        assert again.status_code == 202 and again.json()["status"] == "applied"
    client.app.state.worker.wait_idle(5)  # type: ignore[attr-defined]
    contents = [m.content for m in mem.get_all(user_id=internal_user("a", "u"))]
    assert sorted(contents) == ["The user's codeword is guava.", "The user's codeword is mango."]
    # another tenant cannot see or retry the job
    is_problem(client.get(f"/v1/jobs/{job['job_id']}", headers=HB), 404)
    is_problem(client.post(f"/v1/jobs/{job['job_id']}/retry", headers=HB), 404)


def test_worker_retries_with_backoff_before_parking(
    make_client: Callable[..., tuple[TestClient, Memory]],
) -> None:
    calls = {"n": 0}

    def once_down(messages: list[dict[str, str]]) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise LLMError("timeout")
        return responder(messages)

    client, _ = make_client(
        ScriptedLLM(default=once_down, retries=0),
        worker_settings=WorkerSettings(poll_interval=0.05, max_attempts=3, backoff=0.01),
    )
    job = client.post("/v1/sessions", json=session("u", "date"), headers=HA).json()
    done = wait_job(client, job["job_id"])
    assert done["status"] == "applied" and done["attempts"] == 2


def test_a_crash_before_commit_reruns_the_job_without_duplicates(
    make_client: Callable[..., tuple[TestClient, Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At-least-once: the first run dies inside the store transaction (nothing is
    written); the job runs again and its memories are written exactly once."""
    client, mem = make_client(
        worker_settings=WorkerSettings(poll_interval=0.05, max_attempts=2, backoff=0.01)
    )
    real = mem.store.apply_session
    calls = {"n": 0}

    def dies_once(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("disk I/O error")
        return real(*args, **kwargs)

    monkeypatch.setattr(mem.store, "apply_session", dies_once)
    job = client.post("/v1/sessions", json=session("u", "cherry", "lemon"), headers=HA).json()
    done = wait_job(client, job["job_id"])
    assert done["status"] == "applied" and calls["n"] == 2
    assert mem.store.count(internal_user("a", "u")) == 2
    # running it yet again (a redelivered job) writes nothing
    worker = client.app.state.worker  # type: ignore[attr-defined]
    worker.request_retry((internal_user("a", "u"), done["session_id"], None))
    assert worker.wait_idle(5)
    assert mem.store.count(internal_user("a", "u")) == 2


def test_keys_from_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELTAMEM_API_KEYS", raising=False)
    monkeypatch.delenv("DELTAMEM_API_KEYS_FILE", raising=False)
    assert load_keys() == {}
    monkeypatch.setenv("DELTAMEM_API_KEYS", "k1=acme,k2=globex")
    assert load_keys() == {"k1": "acme", "k2": "globex"}
    f = tmp_path / "keys.json"
    f.write_text('{"k3": "initech"}')
    assert load_keys(f"@{f}") == {"k3": "initech"}
    monkeypatch.delenv("DELTAMEM_API_KEYS")
    g = tmp_path / "keys.txt"
    g.write_text("# keys\nk4=umbrella\n")
    monkeypatch.setenv("DELTAMEM_API_KEYS_FILE", str(g))
    assert load_keys() == {"k4": "umbrella"}
    monkeypatch.delenv("DELTAMEM_API_KEYS_FILE")
    generated = keys_or_generated()
    assert list(generated.values()) == ["default"] and len(next(iter(generated))) > 20


def test_pending_sessions_are_resumed_on_start(tmp_path: Path, embedder: Embedder) -> None:
    """Sessions logged before a crash (never processed) are applied when a server starts."""
    store = SQLiteStore(tmp_path / "crash.db", dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(default=responder), embedder=embedder, store=store, config=SESSION)
    for i, w in enumerate(["one", "two", "three"]):
        mem.log_session(
            session("u", w)["messages"],
            user_id=internal_user("a", "u"),
            session_id=f"s{i}",
            timestamp=f"2029-02-1{i}",
        )
    # one was cut short during a backoff (tries left), one used up all its tries
    for sid, w, fails in (("s7", "seven", 1), ("s8", "eight", 3)):
        mem.log_session(
            session("v", w)["messages"],
            user_id=internal_user("a", "v"),
            session_id=sid,
            timestamp="2029-03-01",
        )
        for _ in range(fails):
            mem.store.mark_failed(internal_user("a", "v"), sid, None, "LLM timeout")
    settings = WorkerSettings(poll_interval=0.05, max_attempts=3, backoff=0.0)
    with TestClient(create_app(mem, KEYS, worker_settings=settings)) as client:
        for i in range(3):
            assert wait_job(client, job_id("u", f"s{i}"))["status"] == "applied"
        mems = client.get("/v1/memories", params={"user_id": "u"}, headers=HA).json()
        # applied in log order: event times ascend with the sessions
        assert [m["content"].split()[-1] for m in mems["memories"]] == ["one.", "two.", "three."]
        for _ in range(500):
            if client.get(f"/v1/jobs/{job_id('v', 's7')}", headers=HA).json()["status"] == (
                "applied"
            ):
                break
            time.sleep(0.01)
        assert wait_job(client, job_id("v", "s7"))["status"] == "applied"
        parked = wait_job(client, job_id("v", "s8"))
        assert parked["status"] == "failed" and parked["error"] == "LLM timeout"
    mem.close()


def test_infer_false_is_stored_verbatim_and_queued_on_request(
    api: tuple[TestClient, Memory],
) -> None:
    client, mem = api
    body = session("u", "plum", sid="d1", infer=False)
    job = client.post("/v1/sessions", json=body, headers=HA).json()
    assert job["status"] == "deferred"
    client.post("/v1/sessions", json=session("u", "ruby", sid="d2", infer=False), headers=HA)
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker.wait_idle(10)  # the worker leaves deferred sessions alone
    assert wait_job(client, job["job_id"])["status"] == "deferred"
    assert mem.store.count(internal_user("a", "u")) == 0
    hits = client.post(
        "/v1/search", json={"query": "codeword plum", "user_id": "u"}, headers=HA
    ).json()["results"]
    assert hits and hits[0]["kind"] == "episode" and "plum" in hits[0]["memory"]["content"]
    # another tenant's key: 404, and the jobs stay deferred
    is_problem(client.post(f"/v1/jobs/{job['job_id']}/retry", headers=HB), 404)
    is_problem(client.post("/v1/sessions/process", json={"user_id": "u"}, headers=HB), 404)
    assert client.post("/v1/sessions/process", headers=HB).json()["jobs"] == []
    assert wait_job(client, job["job_id"])["status"] == "deferred"
    # retry queues one job; process queues the rest of the user's
    r = client.post(f"/v1/jobs/{job['job_id']}/retry", headers=HA)
    assert r.status_code == 202 and r.json()["status"] in ("pending", "running", "applied")
    assert wait_job(client, job["job_id"])["status"] == "applied"
    r = client.post("/v1/sessions/process", json={"user_id": "u"}, headers=HA)
    assert r.status_code == 202 and r.json()["jobs"] == [job_id("u", "d2")]
    assert wait_job(client, job_id("u", "d2"))["status"] == "applied"
    assert mem.store.count(internal_user("a", "u")) == 2


def test_reset_forgets_a_user_of_the_tenant_only(api: tuple[TestClient, Memory]) -> None:
    client, mem = api
    for key, h in (("a", HA), ("b", HB)):
        j = client.post("/v1/sessions", json=session("u", f"w{key}", sid="s1"), headers=h).json()
        wait_job(client, j["job_id"], h)
    is_problem(client.delete("/v1/users/nobody", headers=HB), 404)
    r = client.delete("/v1/users/u", headers=HB)
    assert r.status_code == 200 and r.json()["removed_memories"] == 1
    is_problem(client.delete("/v1/users/u", headers=HB), 404)  # nothing left of it
    assert mem.store.count(internal_user("b", "u")) == 0
    assert mem.store.list_sessions(internal_user("b", "u")) == []
    # tenant a's user of the same name is untouched
    assert mem.store.count(internal_user("a", "u")) == 1
    assert len(mem.store.list_sessions(internal_user("a", "u"))) == 1


def test_inspect_routes_edit_timeline_sessions_calls_users(api: tuple[TestClient, Memory]) -> None:
    client, mem = api
    for key, h in (("a", HA), ("b", HB)):
        j = client.post("/v1/sessions", json=session("u", f"w{key}", sid="s1"), headers=h).json()
        wait_job(client, j["job_id"], h)
    [fact] = client.get("/v1/memories", params={"user_id": "u"}, headers=HA).json()["memories"]
    mid = fact["id"]

    r = client.patch(f"/v1/memories/{mid}", json={"content": " The codeword is x. "}, headers=HA)
    assert r.status_code == 200, r.text
    assert (r.json()["content"], r.json()["version"], r.json()["user_id"]) == (
        "The codeword is x.",
        2,
        "u",
    )
    # unusable text, an actor the API may not write, unknown fields: 422, nothing changed
    history = mem.history(mid)
    for body in (
        {"content": "   "},
        {"content": "x" * 501},
        {"content": "ok", "actor": "manager"},
        {"content": "ok", "extra": 1},
        {},
    ):
        is_problem(client.patch(f"/v1/memories/{mid}", json=body, headers=HA), 422)
    assert (
        is_problem(client.patch(f"/v1/memories/{mid}", json={"content": " "}, headers=HA), 422)[
            "title"
        ]
        == "Invalid edit"
    )
    is_problem(client.delete(f"/v1/memories/{mid}", params={"actor": "manager"}, headers=HA), 422)
    assert mem.history(mid) == history

    r = client.get(f"/v1/memories/{mid}/timeline", params={"user_id": "u"}, headers=HA)
    assert r.status_code == 200
    rows = r.json()["timeline"]
    assert [(v["op"], v["actor"], v["session_id"], v["turns"]) for v in rows] == [
        ("add", "manager", "s1", [0]),
        ("update", "person", None, []),
    ]
    assert {v["user_id"] for v in rows} == {"u"}  # the caller's id, never the store's
    is_problem(client.get(f"/v1/memories/{mid}/timeline", params={"user_id": "v"}, headers=HA), 404)

    r = client.get("/v1/sessions/s1", params={"user_id": "u"}, headers=HA)
    assert r.status_code == 200
    assert (r.json()["user_id"], r.json()["status"], "seq" in r.json()) == ("u", "applied", False)
    assert "codeword=wa" in r.text and "codeword=wb" not in r.text
    is_problem(client.get("/v1/sessions/s2", params={"user_id": "u"}, headers=HA), 404)
    is_problem(client.get("/v1/sessions/s1", headers=HA), 422)  # the user is required

    r = client.get("/v1/sessions", params={"user_id": "u", "status": "applied"}, headers=HA)
    assert [x["session_id"] for x in r.json()["sessions"]] == ["s1"] and r.json()["count"] == 1
    r = client.get("/v1/sessions", params={"user_id": "u", "status": "failed"}, headers=HA)
    assert r.status_code == 200 and r.json()["sessions"] == []
    is_problem(client.get("/v1/sessions", params={"user_id": "nobody"}, headers=HA), 404)
    is_problem(client.get("/v1/sessions", params={"status": "lost"}, headers=HA), 422)
    r = client.get("/v1/sessions", headers=HB)
    assert [(x["user_id"], x["session_id"]) for x in r.json()["sessions"]] == [("u", "s1")]

    r = client.get("/v1/sessions/s1/calls", params={"user_id": "u"}, headers=HA)
    calls = r.json()["calls"]
    assert r.status_code == 200 and calls and {c["user_id"] for c in calls} == {"u"}
    assert all("codeword is wa" in c["reply"] for c in calls)

    assert client.get("/v1/users", headers=HA).json() == {"count": 1, "users": ["u"]}
    assert client.get("/v1/users", params={"prefix": "v"}, headers=HA).json()["users"] == []
    # a prefix cannot reach out of the tenant
    assert client.get("/v1/users", params={"prefix": "../b:"}, headers=HA).json()["users"] == []

    r = client.delete(f"/v1/memories/{mid}", params={"actor": "person"}, headers=HA)
    assert r.status_code == 204
    assert [(h.op, h.actor) for h in mem.history(mid)][-1] == ("delete", "person")
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/users", "/v1/sessions", "/v1/sessions/{session_id}/calls"} <= set(paths)
    assert "patch" in paths["/v1/memories/{memory_id}"]


def test_replay_rebuilds_a_users_memory(api: tuple[TestClient, Memory]) -> None:
    client, mem = api
    for i, w in enumerate(["red", "green"]):
        j = client.post("/v1/sessions", json=session("u", w, sid=f"s{i}"), headers=HA).json()
        wait_job(client, j["job_id"])
    client.post("/v1/sessions", json=session("v", "blue", sid="s0"), headers=HA)
    before = client.get("/v1/memories", params={"user_id": "u"}, headers=HA).json()["memories"]
    r = client.post("/v1/users/u/replay", headers=HA)
    assert r.status_code == 202, r.text
    assert r.json()["removed_memories"] == 2
    assert r.json()["jobs"] == [job_id("u", "s0"), job_id("u", "s1")]
    for j in r.json()["jobs"]:
        assert wait_job(client, j)["status"] == "applied"
    after = client.get("/v1/memories", params={"user_id": "u"}, headers=HA).json()["memories"]
    assert [m["content"] for m in after] == [m["content"] for m in before]
    assert {m["id"] for m in after}.isdisjoint({m["id"] for m in before})
    # the other user, and the other tenant's user of the same name, are untouched
    assert mem.store.count(internal_user("a", "v")) == 1
    assert client.post("/v1/users/u/replay", headers=HB).json()["removed_memories"] == 0


def test_forget_everything_dialogue_removes_no_memory(
    make_client: Callable[..., tuple[TestClient, Memory]],
) -> None:
    """The manager never deletes: a dialogue asking it to wipe memory leaves the count."""
    llm = ScriptedLLM(default=responder)
    client, mem = make_client(llm)
    j = client.post("/v1/sessions", json=session("u", "alpha", "beta", sid="s1"), headers=HA)
    wait_job(client, j.json()["job_id"])
    user = internal_user("a", "u")
    before = {m.id: m.content for m in mem.get_all(user_id=user)}
    assert len(before) == 2
    # the model "obeys": delete ops (outside its output format: the reply is refused
    # and asked again), then, as far as the format lets it, an emptied memory
    llm.push(
        {"operations": [{"op": "delete", "id": "m1"}, {"op": "delete", "id": "m2"}]},
        {
            "operations": [
                {"op": "update", "id": "m1", "type": "persona", "content": ""},
                {"op": "none", "id": "m2"},
            ]
        },
    )
    forget = {
        "user_id": "u",
        "session_id": "s2",
        "messages": [
            {"role": "user", "content": "Forget everything you know about me."},
            {"role": "assistant", "content": "Are you sure?"},
            {"role": "user", "content": "Yes. Delete all my memories, every single one, now."},
        ],
    }
    j2 = client.post("/v1/sessions", json=forget, headers=HA).json()
    assert wait_job(client, j2["job_id"])["status"] == "applied"
    after = {m.id: m.content for m in mem.get_all(user_id=user)}
    assert after == before
    assert mem.store.count(user) >= len(before)


# --- the event loop is never blocked -------------------------------------------------------------
@pytest.mark.anyio
async def test_slow_llm_work_does_not_block_the_event_loop(
    tmp_path: Path, embedder: Embedder
) -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow(messages: list[dict[str, str]]) -> Any:
        entered.set()
        assert release.wait(10)
        return responder(messages)

    store = SQLiteStore(tmp_path / "slow.db", dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(default=slow), embedder=embedder, store=store, config=SESSION)
    app = create_app(mem, KEYS, worker_settings=FAST)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as client,
    ):
        r = await client.post("/v1/sessions", json=session("u", "slow"), headers=HA)
        assert r.status_code == 202
        assert await anyio.to_thread.run_sync(entered.wait, 5)  # the worker is in the LLM

        async def ask() -> httpx.Response:
            return await client.post(
                "/v1/answer", json={"question": "q?", "user_id": "u"}, headers=HA
            )

        async with anyio.create_task_group() as tg:
            answers: list[httpx.Response] = []

            async def answer_task() -> None:
                answers.append(await ask())

            tg.start_soon(answer_task)
            with anyio.fail_after(2):  # answered while the LLM is stuck in two threads
                assert (await client.get("/healthz")).status_code == 200
                got = await client.get("/v1/memories", params={"user_id": "u"}, headers=HA)
                assert got.status_code == 200
                job = await client.get(f"/v1/jobs/{r.json()['job_id']}", headers=HA)
                assert job.json()["status"] == "running"
            release.set()
        assert answers[0].status_code == 200
    mem.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- tenant isolation, as a property ----------------------------------------------------------
USERS = ["u1", "a:u1", "b:u1"]  # ids that try to look like another tenant's
TENANTS = {"a": HA, "b": HB}

op_strategy = st.one_of(
    st.tuples(st.just("add"), st.sampled_from("ab"), st.sampled_from(USERS)),
    st.tuples(st.just("search"), st.sampled_from("ab"), st.sampled_from(USERS)),
    st.tuples(st.just("list"), st.sampled_from("ab"), st.sampled_from(USERS)),
    st.tuples(st.just("answer"), st.sampled_from("ab"), st.sampled_from(USERS)),
    st.tuples(
        st.just("session"),
        st.sampled_from("ab"),
        st.tuples(st.sampled_from(USERS), st.integers(0, 10_000)),
    ),
    st.tuples(st.just("get"), st.sampled_from("ab"), st.integers(0, 10_000)),
    st.tuples(st.just("history"), st.sampled_from("ab"), st.integers(0, 10_000)),
    st.tuples(st.just("delete"), st.sampled_from("ab"), st.integers(0, 10_000)),
    st.tuples(st.just("job"), st.sampled_from("ab"), st.integers(0, 10_000)),
)


@pytest.fixture(scope="module")
def shared_api(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    path = tmp_path_factory.mktemp("iso") / "iso.db"
    mem = Memory(
        llm=ScriptedLLM(default=responder),
        embedder=embedder,
        store=SQLiteStore(path, dim=embedder.dim, embedder_name=embedder.name),
        config=SESSION,
    )
    with TestClient(create_app(mem, KEYS, worker_settings=FAST)) as client:
        # codeword -> (tenant, user); memory id -> (tenant, user); job id -> tenant
        yield client, {"words": {}, "ids": {}, "jobs": {}, "n": 0}
    mem.close()


def _word_owner(state: dict[str, Any], content: str) -> tuple[str, str]:
    word = re.search(r"codeword(?: is |=)(\w+)", content)  # a fact, or a raw turn
    assert word, content
    return state["words"][word.group(1)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_strategy, min_size=1, max_size=8))
def test_no_response_ever_shows_another_tenants_or_users_memory(
    shared_api: tuple[TestClient, dict[str, Any]], ops: list[tuple[str, str, Any]]
) -> None:
    client, state = shared_api
    for kind, tenant, arg in ops:
        h = TENANTS[tenant]
        if kind == "add":
            state["n"] += 1
            word = f"w{state['n']}{tenant}{USERS.index(arg)}"
            state["words"][word] = (tenant, arg)
            r = client.post("/v1/sessions", json=session(arg, word), headers=h)
            assert r.status_code == 202
            state["jobs"][r.json()["job_id"]] = tenant
            wait_job(client, r.json()["job_id"], h)
            for m in client.get("/v1/memories", params={"user_id": arg}, headers=h).json()[
                "memories"
            ]:
                state["ids"][m["id"]] = (tenant, arg)
        elif kind in ("search", "list", "answer", "session"):
            if kind == "search":
                r = client.post(
                    "/v1/search", json={"query": "codeword w1", "user_id": arg}, headers=h
                )
                mems = [x["memory"] for x in r.json()["results"]]
                # both tiers: facts and the raw turns (episodes) are checked alike
                kinds = sorted({x["kind"] for x in r.json()["results"]})
                event(f"search returned kinds {kinds}")
            elif kind == "list":
                r = client.get("/v1/memories", params={"user_id": arg}, headers=h)
                mems = r.json()["memories"]
            elif kind == "session":
                arg, pick = arg
                jobs = sorted(state["jobs"])
                sess = parse_job_id(jobs[pick % len(jobs)])[1] if jobs else "none"
                r = client.get(f"/v1/sessions/{sess}/memories", params={"user_id": arg}, headers=h)
                mems = r.json()["memories"]
            else:
                r = client.post(
                    "/v1/answer", json={"question": "codewords?", "user_id": arg}, headers=h
                )
                mems = [x["memory"] for x in r.json()["memories"]]
                for word in r.json()["answer"].split()[1:]:
                    assert state["words"][word] == (tenant, arg)
            assert r.status_code == 200, r.text
            event(f"{kind} returned {'some' if mems else 'no'} memories")
            for m in mems:
                assert m["user_id"] == arg
                assert _word_owner(state, m["content"]) == (tenant, arg)
        elif kind in ("get", "history", "delete"):
            if not state["ids"]:
                continue
            ids = sorted(state["ids"])
            mid = ids[arg % len(ids)]
            owner_tenant, owner_user = state["ids"][mid]
            if kind == "get":
                r = client.get(f"/v1/memories/{mid}", headers=h)
            elif kind == "history":
                r = client.get(f"/v1/memories/{mid}/history", headers=h)
            else:
                r = client.delete(f"/v1/memories/{mid}", headers=h)
            if owner_tenant != tenant:
                is_problem(r, 404)
                event(f"{kind} of another tenant's memory refused")
                # and another user of the right tenant is refused too when named
                continue
            if kind == "delete" and r.status_code == 204:
                state["ids"][mid] = (owner_tenant, owner_user)
                continue
            if r.status_code == 404:  # deleted earlier by its own tenant
                continue
            assert r.status_code in (200, 204), r.text
            if kind == "get":
                assert r.json()["user_id"] == owner_user
                assert _word_owner(state, r.json()["content"]) == (tenant, owner_user)
                other = next(u for u in USERS if u != owner_user)
                is_problem(
                    client.get(f"/v1/memories/{mid}", params={"user_id": other}, headers=h), 404
                )
        else:  # job
            if not state["jobs"]:
                continue
            jobs = sorted(state["jobs"])
            jid = jobs[arg % len(jobs)]
            r = client.get(f"/v1/jobs/{jid}", headers=h)
            if state["jobs"][jid] == tenant:
                assert r.status_code == 200
            else:  # the same user name may exist in the caller's tenant: then it is theirs
                user, sess, _ = parse_job_id(jid)
                if r.status_code == 200:
                    assert r.json()["user_id"] == user
                else:
                    is_problem(r, 404)
