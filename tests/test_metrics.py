"""GET /metrics: Prometheus' text format (read back with prometheus_client's own
parser), behind the API keys; the queue by state from the session log, job, model
call and search latencies, tokens, operations and refusals by rule code, on both
stores.

A scripted LLM stands in for the model (one memory per ``codeword=X`` of a
session, test_api.responder); the embedder and the stores are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from test_api import responder, session
from test_forget import _store

from deltamem.embed import Embedder
from deltamem.llm.base import LLMError
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.store.users import users_of

KEY = "key-of-tenant-m-0123456789"
H = {"Authorization": f"Bearer {KEY}"}
FAST = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """sample name and labels -> value, from the exposition."""
    r = client.get("/metrics", headers=H)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def total(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **kw: str
) -> float:
    """The sum of the samples of `name` whose labels include `kw`."""
    want = set(kw.items())
    return sum(v for (n, labels), v in samples.items() if n == name and want <= set(labels))


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> Iterator[tuple[TestClient, Memory, ScriptedLLM]]:
    llm = ScriptedLLM(default=responder)
    store = _store(request.param, tmp_path / "metrics.db", embedder)
    mem = Memory(llm=llm, embedder=embedder, store=store, config=SESSION)
    with TestClient(create_app(mem, {KEY: "m"}, worker_settings=FAST)) as client:
        yield client, mem, llm
    mem.close()


def test_metrics_need_an_api_key(service: tuple[TestClient, Memory, ScriptedLLM]) -> None:
    client, _, _ = service
    r = client.get("/metrics")
    assert r.status_code == 401 and r.headers["content-type"].startswith("application/problem")
    assert client.get("/metrics", headers={"X-API-Key": "not-a-key"}).status_code == 401
    assert client.get("/metrics", headers={"X-API-Key": KEY}).status_code == 200
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_metrics_count_what_the_service_did(
    service: tuple[TestClient, Memory, ScriptedLLM],
) -> None:
    client, mem, llm = service
    worker: Any = client.app.state.worker  # type: ignore[attr-defined]
    empty = scrape(client)
    assert total(empty, "deltamem_jobs") == 0
    assert total(empty, "deltamem_job_seconds_count") == 0

    # two sessions; the second says again what the first did (a refused duplicate)
    for sid in ("s1", "s2"):
        r = client.post("/v1/sessions", json=session("ana", "apple", sid=sid), headers=H)
        assert r.status_code == 202, r.text
        assert worker.wait_idle(10)
    # one deferred (infer=false), one whose model fails (parked as failed)
    deferred = session("ana", "kiwi", sid="s3", infer=False)
    assert client.post("/v1/sessions", json=deferred, headers=H).status_code == 202
    llm.push(LLMError("the model is down"), LLMError("the model is down"))
    assert client.post("/v1/sessions", json=session("bo", "fig", sid="s4"), headers=H).status_code
    assert worker.wait_idle(10)
    llm.replies.clear()
    for tiers in ("all", "all", "facts"):
        body = {"query": "apple", "user_id": "ana", "tiers": tiers}
        assert client.post("/v1/search", json=body, headers=H).status_code == 200
    r = client.post("/v1/answer", json={"question": "Codeword?", "user_id": "ana"}, headers=H)
    assert r.status_code == 200

    got = scrape(client)
    jobs = {s: total(got, "deltamem_jobs", state=s) for s in ("pending", "running", "deferred")}
    assert jobs == {"pending": 0, "running": 0, "deferred": 1}
    assert total(got, "deltamem_jobs", state="applied") == 2
    assert total(got, "deltamem_jobs", state="failed") == 1
    assert users_of(mem.store).session_counts() == {
        "pending": 0,
        "deferred": 1,
        "failed": 1,
        "applied": 2,
    }

    assert total(got, "deltamem_job_seconds_count", outcome="applied") == 2
    assert total(got, "deltamem_job_seconds_count", outcome="not_applied") == 1
    assert total(got, "deltamem_job_seconds_sum") > 0
    # every model call: sessions' extraction (and the failed tries) and the answer
    assert total(got, "deltamem_llm_call_seconds_count") == len(llm.requests)
    assert total(got, "deltamem_llm_call_seconds_count", outcome="error") == 2
    usage = mem.llm.usage
    assert total(got, "deltamem_llm_tokens_total", kind="prompt") == usage.prompt_tokens > 0
    assert total(got, "deltamem_llm_tokens_total", kind="completion") == usage.completion_tokens
    assert total(got, "deltamem_search_seconds_count", tiers="all") == 2
    assert total(got, "deltamem_search_seconds_count", tiers="facts") == 1
    assert total(got, "deltamem_search_seconds_bucket", tiers="all", le="+Inf") == 2

    # operations and refusals, as the applied sessions recorded them
    ops = [o for sid in ("s1", "s2") for o in mem.session_operations(sid, user_id="m:ana")]
    assert total(got, "deltamem_operations_total", op="add") == sum(o.op == "add" for o in ops)
    refused = [o for o in ops if o.op == "none" and o.rule]
    assert refused, ops  # the second session's duplicate
    for rule in {o.rule for o in refused}:
        assert rule is not None
        assert total(got, "deltamem_refusals_total", rule=rule) == sum(
            o.rule == rule for o in refused
        )
