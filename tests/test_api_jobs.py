"""REST jobs that must not block (issue 40), on SQLite and PostgreSQL: a big session is
acknowledged at once (its turns are embedded by the worker, not in the request), a
session over the size limits is a 413, a queued or running job can be cancelled,
and forgetting a user cancels their work instead of waiting for it.

A scripted LLM stands in for the model; the embedder is the real one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import STORE_BACKENDS, STORE_FACTORIES
from fakes import SESSION, ScriptedLLM
from fastapi.testclient import TestClient
from test_api import FAST, HA, KEYS, is_problem, responder, session

from deltamem.embed import Embedder
from deltamem.embed.base import EmbedderError, l2_normalise
from deltamem.memory import MAX_SESSION_MESSAGES, Memory
from deltamem.server.app import create_app
from deltamem.server.scope import internal_user
from deltamem.store.base import Store
from deltamem.types import MAX_MESSAGE_CHARS, SessionRecord

MakeApi = Callable[..., tuple[TestClient, Memory]]


@pytest.fixture(params=STORE_BACKENDS)
def make_api(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> Iterator[MakeApi]:
    real = embedder
    opened: list[tuple[TestClient, Memory]] = []

    def make(
        llm: ScriptedLLM | None = None,
        embedder: Callable[[Embedder], Embedder] = lambda e: e,
        **kw: Any,
    ) -> tuple[TestClient, Memory]:
        store = STORE_FACTORIES[request.param](tmp_path, real.dim)
        mem = Memory(
            llm=llm or ScriptedLLM(default=responder),
            embedder=embedder(real),
            store=store,
            config=SESSION,
        )
        kw.setdefault("worker_settings", FAST)
        client = TestClient(create_app(mem, KEYS, **kw))
        client.__enter__()
        opened.append((client, mem))
        return client, mem

    yield make
    for client, mem in opened:
        client.__exit__(None, None, None)
        mem.close()


class HashEmbedder(Embedder):
    """Unit vectors from a hash of the text, counting what it embeds: the real
    MiniLM takes 10 to 45 s for a big session's 200 turns on a small machine, which
    this test has no need to spend (it checks the request embeds nothing)."""

    def __init__(self, like: Embedder) -> None:
        self.name, self.dim = like.name, like.dim
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") for t in texts]
        rows = [np.random.default_rng(s).standard_normal(self.dim) for s in seeds]
        return l2_normalise(np.array(rows, dtype=np.float32).reshape(len(texts), self.dim))


def big_session(user: str, turns: int = 200, chars: int = 15_000) -> dict[str, Any]:
    """About `turns` x `chars` bytes (3 MB by default), under every limit; one turn
    names a codeword."""
    filler = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[: chars - 40]
    return {
        "user_id": user,
        "session_id": "big",
        "timestamp": "2029-02-13T10:51:39",
        "messages": [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i} {'codeword=whale ' if i == 6 else ''}{filler}",
            }
            for i in range(turns)
        ],
    }


def test_a_3mb_session_is_acknowledged_in_under_a_second(make_api: MakeApi) -> None:
    client, mem = make_api(start_worker=False, embedder=HashEmbedder)
    embedder = mem.embedder
    assert isinstance(embedder, HashEmbedder)
    body = big_session("bigtalker")
    client.post("/v1/sessions", json=session("warmup", "x"), headers=HA)  # first-call costs
    before = embedder.texts
    started = time.perf_counter()
    r = client.post("/v1/sessions", json=body, headers=HA)
    took = time.perf_counter() - started
    assert r.status_code == 202, r.text[:500]
    assert took < 1.0, f"a 3 MB session took {took:.2f} s to acknowledge"
    assert embedder.texts == before  # nothing embedded in the request
    # logged durably before the 202, its turns not embedded yet: the worker does that
    uid = internal_user("a", "bigtalker")
    rec = mem.store.get_session(uid, "big")
    assert rec is not None and len(rec.messages) == 200 and rec.status == "pending"
    assert mem.store.count_episodes(uid) == 0
    assert any(s.session_id == "big" for s in mem.store.unindexed_sessions())

    # what the worker does first (its LLM work on 200 long turns is not this test's)
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker.index_logged() == 1  # the small warm-up was indexed in its request
    assert mem.store.count_episodes(uid) == 200
    assert not mem.store.unindexed_sessions()
    hits = client.post(
        "/v1/search",
        json={"query": "codeword=whale", "user_id": "bigtalker", "tiers": "episodes"},
        headers=HA,
    ).json()["results"]
    # (the hashed vectors rank at random: the keyword ranking finds the turn)
    assert any(h["memory"]["content"].startswith("turn 6 codeword=whale") for h in hits)


class PickyEmbedder(HashEmbedder):
    """Fails on any text that says "unembeddable" (a remote embedder refusing it)."""

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("unembeddable" in t for t in texts):
            raise EmbedderError("the embedding server refused the text (scripted)")
        return super().embed(texts)


def test_a_session_the_embedder_fails_on_holds_back_nothing(make_api: MakeApi) -> None:
    client, mem = make_api(start_worker=False, embedder=PickyEmbedder)
    bad = session("u", "otter", sid="s1")
    bad["messages"][0]["content"] += " unembeddable"
    for body in (bad, session("u", "heron", sid="s2")):
        assert client.post("/v1/sessions", json=body, headers=HA).status_code == 202
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker.run_once() == 2
    uid = internal_user("a", "u")
    # s1 fails as a job would whoever embedded it (the manager embeds its turns too);
    # s2, after it, is indexed and applied all the same
    assert [(r.session_id, r.status) for r in mem.store.list_sessions(uid)] == [
        ("s1", "failed"),
        ("s2", "applied"),
    ]
    assert [m.content for m in mem.get_all(user_id=uid)] == ["The user's codeword is heron."]
    assert [r.session_id for r in mem.store.unindexed_sessions()] == ["s1"]
    assert mem.store.count_episodes(uid) == 2


def test_a_session_logged_unindexed_is_indexed_when_the_store_opens(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A kill -9 between the 202 and the worker's indexing leaves a logged session
    without episodes: the next Memory on the store indexes it."""
    from deltamem.store.sqlite import SQLiteStore

    def open_memory() -> Memory:
        st = SQLiteStore(tmp_path / "k.db", dim=embedder.dim, embedder_name=embedder.name)
        return Memory(llm=ScriptedLLM(default=responder), embedder=embedder, store=st)

    mem = open_memory()
    mem.log_session(session("u", "otter")["messages"], user_id="u", session_id="s", index=False)
    assert mem.store.count_episodes("u") == 0
    mem.store.close()  # no clean close of the Memory: as a killed process leaves it
    mem = open_memory()
    try:
        assert mem.store.count_episodes("u") == 2
        assert not mem.store.unindexed_sessions()
    finally:
        mem.close()


def test_sessions_over_the_size_limits_are_413(make_api: MakeApi) -> None:
    client, mem = make_api(start_worker=False)
    good = session("u", "x")
    many = {**good, "messages": [{"role": "user", "content": "a"}] * (MAX_SESSION_MESSAGES + 1)}
    body = is_problem(client.post("/v1/sessions", json=many, headers=HA), 413)
    assert body["title"] == "Session too large" and "messages" in body["detail"]
    long = {**good, "messages": [{"role": "user", "content": "a" * (MAX_MESSAGE_CHARS + 1)}]}
    assert (
        "content" in is_problem(client.post("/v1/sessions", json=long, headers=HA), 413)["detail"]
    )
    at_limit = {**good, "messages": [{"role": "user", "content": "a" * MAX_MESSAGE_CHARS}]}
    assert client.post("/v1/sessions", json=at_limit, headers=HA).status_code == 202
    assert len(mem.store.list_sessions()) == 1  # the refused ones logged nothing


def test_cancel_a_queued_job(make_api: MakeApi) -> None:
    client, mem = make_api(start_worker=False)
    job = client.post("/v1/sessions", json=session("u", "otter", sid="s1"), headers=HA).json()
    kept = client.post("/v1/sessions", json=session("u", "heron", sid="s2"), headers=HA).json()
    worker = client.app.state.worker  # type: ignore[attr-defined]
    worker.index_logged()  # its turns are episodes already: they go with it

    r = client.delete(f"/v1/jobs/{job['job_id']}", headers=HA)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled" and r.json()["job_id"] == job["job_id"]
    is_problem(client.get(f"/v1/jobs/{job['job_id']}", headers=HA), 404)
    is_problem(client.delete(f"/v1/jobs/{job['job_id']}", headers=HA), 404)
    is_problem(client.delete("/v1/jobs/nobody:nothing", headers=HA), 404)
    uid = internal_user("a", "u")
    assert mem.store.get_session(uid, "s1") is None
    assert mem.store.count_episodes(uid) == 2  # the other session's two turns

    worker.run_once()
    contents = [m.content for m in mem.get_all(user_id=uid)]
    assert contents == ["The user's codeword is heron."]
    assert client.get(f"/v1/jobs/{kept['job_id']}", headers=HA).json()["status"] == "applied"
    # an applied job cannot be cancelled; another tenant's job is not there at all
    body = is_problem(client.delete(f"/v1/jobs/{kept['job_id']}", headers=HA), 409)
    assert "applied" in body["detail"]
    other = {"X-API-Key": next(k for k, t in KEYS.items() if t == "b")}
    is_problem(client.delete(f"/v1/jobs/{kept['job_id']}", headers=other), 404)
    # a deferred job (infer=false) is cancelled as well
    deferred = client.post(
        "/v1/sessions", json=session("u", "lynx", sid="s3", infer=False), headers=HA
    ).json()
    r = client.delete(f"/v1/jobs/{deferred['job_id']}", headers=HA)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


def test_deleting_a_user_cancels_their_queued_work(make_api: MakeApi) -> None:
    client, mem = make_api(start_worker=False)
    jobs = [
        client.post("/v1/sessions", json=session("u", w, sid=w), headers=HA).json()["job_id"]
        for w in ("otter", "heron")
    ]
    started = time.perf_counter()
    r = client.delete("/v1/users/u", headers=HA)
    assert r.status_code == 200, r.text
    assert time.perf_counter() - started < 1.0
    assert sorted(r.json()["cancelled_jobs"]) == sorted(jobs)
    assert r.json()["removed"]["sessions"] == 2
    for job in jobs:
        is_problem(client.get(f"/v1/jobs/{job}", headers=HA), 404)
    client.app.state.worker.run_once()  # type: ignore[attr-defined]
    uid = internal_user("a", "u")
    assert not mem.store.list_sessions(uid) and not mem.store.count(uid)


class Gate:
    """A model reply that blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def __call__(self, messages: Any) -> Any:
        self.entered.set()
        assert self.open.wait(20)
        return responder(messages)


@pytest.mark.parametrize("how", ["cancel the job", "delete the user"])
def test_a_running_job_is_cancelled_without_waiting(make_api: MakeApi, how: str) -> None:
    gate = Gate()
    client, mem = make_api(ScriptedLLM(default=gate))
    job = client.post("/v1/sessions", json=session("u", "otter", sid="s1"), headers=HA).json()
    assert gate.entered.wait(20)  # the worker is in the model call, holding the user
    assert client.get(f"/v1/jobs/{job['job_id']}", headers=HA).json()["status"] == "running"

    started = time.perf_counter()
    if how == "cancel the job":
        r = client.delete(f"/v1/jobs/{job['job_id']}", headers=HA)
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    else:
        r = client.delete("/v1/users/u", headers=HA)
        assert r.status_code == 200 and r.json()["cancelled_jobs"] == [job["job_id"]], r.text
    assert time.perf_counter() - started < 1.0  # not the lease wait (120 s by default)

    gate.open.set()  # the model answers: the worker's result must be dropped
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker.wait_idle(20)
    deadline = time.monotonic() + 10
    while worker.in_hand() and time.monotonic() < deadline:
        time.sleep(0.02)
    uid = internal_user("a", "u")
    assert not mem.get_all(user_id=uid), "the cancelled job's memories were applied"
    assert mem.store.get_session(uid, "s1") is None
    assert mem.store.session_calls(uid, "s1") == []  # the dropped try's calls went too
    assert worker.stats.failed == 0 and worker.stats.applied == 0
    is_problem(client.get(f"/v1/jobs/{job['job_id']}", headers=HA), 404)

    # the same session id sent again is a new job, applied as usual
    again = client.post("/v1/sessions", json=session("u", "heron", sid="s1"), headers=HA).json()
    assert worker.wait_idle(20)
    done = client.get(f"/v1/jobs/{again['job_id']}", headers=HA).json()
    assert done["status"] == "applied", done
    assert [m.content for m in mem.get_all(user_id=uid)] == ["The user's codeword is heron."]
    assert mem.store.count_episodes(uid) == 2  # indexed by the worker before it applied


def test_the_store_withdraws_a_session_not_applied(store: Store) -> None:
    """`Store.cancel_session` on each backend: the row, its episodes and its calls go
    in one transaction; an applied session stays; a session logged again since
    under the same id (another `seq`) is not touched; a planned apply of the
    withdrawn session is refused."""
    from fakes import DIM, unit
    from fakes import session as record

    from deltamem.episodes import session_episodes
    from deltamem.llm.base import CallRecord
    from deltamem.store.base import PlannedEpisode, PlannedWrite, StoreError

    def log(rec: SessionRecord) -> SessionRecord:
        eps = [PlannedEpisode(e, unit(1.0, dim=DIM)) for e in session_episodes(rec)]
        return store.log_session(rec, eps)[0]

    def call(sid: str) -> CallRecord:
        return CallRecord("manager", "m", 1, 1, 0, 0.1, True, user_id="u1", session_id=sid)

    s1, s2 = log(record("s1")), log(record("s2"))
    store.log_call(call("s1"))
    assert store.count_episodes("u1") == 2
    assert store.cancel_session("u1", "s1") == "pending"
    assert store.get_session("u1", "s1") is None and store.count_episodes("u1") == 1
    assert store.session_calls("u1", "s1") == []
    assert store.cancel_session("u1", "s1") is None  # gone already
    with pytest.raises(StoreError, match="not in the log"):
        store.apply_session(s1, [PlannedWrite("add", "A fact.", unit(1.0, dim=DIM))], [])
    # logged again with other content: the old plan is not applied to the new entry
    again = log(record("s1", text="something else"))
    with pytest.raises(StoreError, match="not in the log"):
        store.apply_session(s1, [PlannedWrite("add", "A fact.", unit(1.0, dim=DIM))], [])
    assert store.cancel_session("u1", "s1", seq=s1.seq) == "pending"  # another entry
    assert store.get_session("u1", "s1") is not None
    assert store.cancel_session("u1", "s1", seq=again.seq) == "pending"
    # applied: left as it is
    store.apply_session(s2, [PlannedWrite("add", "A fact.", unit(1.0, dim=DIM))], [])
    assert store.cancel_session("u1", "s2") == "applied"
    assert store.get_session("u1", "s2") is not None and store.count("u1") == 1
    # deferred and agent-scoped sessions are withdrawn alike
    log(record("s3", agent_id="bot").model_copy(update={"status": "deferred"}))
    assert store.cancel_session("u1", "s3") is None  # the agent is part of the key
    assert store.cancel_session("u1", "s3", "bot") == "deferred"
