"""Faults of the model, end to end over real loopback HTTP (tests/llm_stub.py): a
reply that parses but has the wrong shape, a model that never answers (timeouts,
the bound on the time to a parked job), one tenant's hung model beside another
tenant's sessions, and stopping a worker whose model hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_stub import LLMStub
from typer.testing import CliRunner

from deltamem.cli.main import app as cli_app
from deltamem.embed import Embedder
from deltamem.llm import LLMConfig, LLMError, LLMTimeout, make_llm
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.server.config import WorkerSettings
from deltamem.server.scope import internal_user
from deltamem.store.sqlite import SQLiteStore

# the fake model answers with whole operation lists (the "session" strategy)
pytestmark = pytest.mark.usefixtures("session_manager_env")

KEYS = {"key-of-tenant-a-0123456789": "a", "key-of-tenant-b-0123456789": "b"}
HA = {"Authorization": "Bearer key-of-tenant-a-0123456789"}
HB = {"Authorization": "Bearer key-of-tenant-b-0123456789"}
ROOT = Path(__file__).resolve().parent.parent


def add_op(prompt: str) -> dict[str, Any]:
    return {"operations": [{"op": "add", "type": "event", "content": "Ana keeps bees."}]}


def session(user: str, text: str = "I keep bees.", sid: str = "s1") -> dict[str, Any]:
    return {"user_id": user, "session_id": sid, "messages": [{"role": "user", "content": text}]}


def wait_for(pred: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


# --- a reply of the wrong shape ------------------------------------------------------------
@pytest.mark.parametrize("reply", [{}, {"operations": "DROP TABLE"}, '{"operations": [7]}'])
def test_cli_add_reports_a_wrong_shape_reply_as_failed_and_remembers_nothing(
    tmp_path: Path, reply: Any
) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(session("ana")), encoding="utf-8")
    db = tmp_path / "x.db"
    with LLMStub(lambda _p: reply) as llm:
        res = CliRunner().invoke(
            cli_app, ["--db", str(db), "--llm", llm.spec, "add", str(f), "--json"]
        )
        calls = len(llm.calls)
    assert res.exit_code == 1, res.output
    [row] = json.loads(res.stdout)
    assert row["status"] == "failed" and "wrong shape" in row["error"], row
    assert calls == 3  # asked three times (retries=2 for OpenAI-compatible servers)
    with Memory(str(db)) as mem:
        [rec] = mem.store.list_sessions()
        assert rec.status == "failed" and "wrong shape" in (rec.error or "")
        assert mem.get_all(user_id="ana") == []


def test_cli_add_applies_a_valid_empty_list_as_nothing_to_remember(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(session("ana")), encoding="utf-8")
    with LLMStub(lambda _p: {"operations": []}) as llm:
        res = CliRunner().invoke(
            cli_app, ["--db", str(tmp_path / "x.db"), "--llm", llm.spec, "add", str(f), "--json"]
        )
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.stdout)
    assert row["status"] == "applied" and row["operations"] == []


@pytest.fixture
def memory_on(tmp_path: Path, embedder: Embedder) -> Iterator[Any]:
    opened: list[Memory] = []

    def make(llm: LLMConfig | str) -> Memory:
        store = SQLiteStore(tmp_path / f"m{len(opened)}.db", dim=embedder.dim)
        mem = Memory(llm=llm, embedder=embedder, store=store)
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()


def test_service_job_with_a_wrong_shape_reply_ends_failed_with_the_reason(
    memory_on: Any,
) -> None:
    settings = WorkerSettings(poll_interval=0.05, max_attempts=2, backoff=0.0)
    with LLMStub(lambda _p: {"operations": "DROP TABLE"}) as llm:
        mem = memory_on(llm.spec)
        with TestClient(create_app(mem, KEYS, worker_settings=settings)) as client:
            job = client.post("/v1/sessions", json=session("ana"), headers=HA).json()["job_id"]
            assert client.app.state.worker.wait_idle(20)  # type: ignore[attr-defined]
            out = client.get(f"/v1/jobs/{job}", headers=HA).json()
        assert out["status"] == "failed" and out["attempts"] == 2, out
        assert "wrong shape (operations: Input should be a valid list" in out["error"]
        assert len(llm.calls) == 2 * 3  # two attempts, three asks each
    assert mem.get_all(user_id=internal_user("a", "ana")) == []


# --- a model that never answers --------------------------------------------------------------
def test_a_hung_call_times_out_once_and_is_not_asked_again() -> None:
    with LLMStub(hang=True) as llm:
        model = make_llm(LLMConfig(llm.spec, timeout=0.5))
        t0 = time.monotonic()
        with pytest.raises(LLMTimeout, match="no answer within"):
            model.complete_json([{"role": "user", "content": "x"}], {}, purpose="t")
        spent = time.monotonic() - t0
        assert len(llm.calls) == 1
    assert 0.5 <= spent < 1.5


def test_the_timeout_comes_from_the_config_the_environment_or_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = "http://127.0.0.1:9/v1#m"
    monkeypatch.delenv("DELTAMEM_LLM_TIMEOUT", raising=False)
    assert make_llm(spec).timeout == 300.0
    monkeypatch.setenv("DELTAMEM_LLM_TIMEOUT", "7.5")
    assert make_llm(spec).timeout == 7.5
    assert make_llm(LLMConfig(spec, timeout=2)).timeout == 2.0  # the config wins
    monkeypatch.setenv("DELTAMEM_LLM_TIMEOUT", "soon")
    with pytest.raises(LLMError, match="DELTAMEM_LLM_TIMEOUT"):
        make_llm(spec)
    with pytest.raises(LLMError, match="positive"):
        make_llm(LLMConfig(spec, timeout=0))


def test_cli_llm_timeout_bounds_a_hung_add(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(session("ana")), encoding="utf-8")
    with LLMStub(hang=True) as llm:
        t0 = time.monotonic()
        res = CliRunner().invoke(
            cli_app,
            [
                *("--db", str(tmp_path / "x.db"), "--llm", llm.spec, "--llm-timeout", "0.5"),
                *("add", str(f), "--json"),
            ],
        )
        spent = time.monotonic() - t0
        assert len(llm.calls) == 1
    assert res.exit_code == 1, res.output
    assert "no answer within" in json.loads(res.stdout)[0]["error"]
    assert spent < 10  # the embedder loads in this too; the default would be 300 s


def test_a_hung_model_parks_the_job_within_attempts_times_the_timeout(memory_on: Any) -> None:
    timeout, attempts, backoff = 0.5, 3, 0.1
    settings = WorkerSettings(poll_interval=0.05, max_attempts=attempts, backoff=backoff)
    bound = attempts * timeout + backoff * (2**attempts - 1)  # the README's bound
    with LLMStub(hang=True) as llm:
        mem = memory_on(LLMConfig(llm.spec, timeout=timeout))
        with TestClient(create_app(mem, KEYS, worker_settings=settings)) as client:
            client.app.state.worker.ensure_llm()  # type: ignore[attr-defined]
            t0 = time.monotonic()
            job = client.post("/v1/sessions", json=session("ana"), headers=HA).json()["job_id"]

            def parked() -> bool:
                return client.get(f"/v1/jobs/{job}", headers=HA).json()["status"] == "failed"

            assert wait_for(parked, bound + 5)
            spent = time.monotonic() - t0
            out = client.get(f"/v1/jobs/{job}", headers=HA).json()
        assert len(llm.calls) == attempts  # one call per attempt: a timeout is not re-asked
    assert out["attempts"] == attempts and "no answer within" in out["error"]
    assert attempts * timeout <= spent <= bound + 1.5, spent


# --- one tenant's hung model, another tenant's sessions ----------------------------------------
def slow_if_hang(prompt: str) -> bool:
    return "HANG" in prompt


def test_another_tenants_session_is_applied_while_one_tenants_model_hangs(
    memory_on: Any,
) -> None:
    settings = WorkerSettings(poll_interval=0.05, max_attempts=1, concurrency=2, stop_grace=1.0)
    with LLMStub(add_op, hang=slow_if_hang) as llm:
        mem = memory_on(LLMConfig(llm.spec, timeout=60))
        client = TestClient(create_app(mem, KEYS, worker_settings=settings))
        client.__enter__()
        worker = client.app.state.worker  # type: ignore[attr-defined]
        try:
            a = client.post("/v1/sessions", json=session("ana", "HANG please"), headers=HA)
            assert wait_for(lambda: llm.hanging == 1, 10)
            t0 = time.monotonic()
            b = client.post("/v1/sessions", json=session("bob"), headers=HB).json()["job_id"]

            def applied() -> bool:
                return client.get(f"/v1/jobs/{b}", headers=HB).json()["status"] == "applied"

            assert wait_for(applied, 10)
            latency = time.monotonic() - t0
            a_job = client.get(f"/v1/jobs/{a.json()['job_id']}", headers=HA).json()
            assert a_job["status"] == "running"
            print(f"tenant B applied in {latency:.3f}s while tenant A's model hangs")
            assert latency < 5

            # stopping: within the grace, A's session left pending (not failed), its
            # lease given up so that the next worker can take it at once
            t0 = time.monotonic()
            worker.stop()
            assert time.monotonic() - t0 < settings.stop_grace + 1
            rec = mem.store.get_session(internal_user("a", "ana"), "s1")
            assert rec is not None and rec.status == "pending" and rec.attempts == 0
            assert mem.store.list_leases() == []
        finally:
            client.__exit__(None, None, None)


def test_sessions_of_one_user_still_apply_one_at_a_time_in_order(memory_on: Any) -> None:
    settings = WorkerSettings(poll_interval=0.05, max_attempts=1, concurrency=4)
    seen: list[str] = []

    def answer(prompt: str) -> dict[str, Any]:
        seen.append(prompt)
        time.sleep(0.05)
        return add_op(prompt)

    with LLMStub(answer) as llm:
        mem = memory_on(llm.spec)
        with TestClient(create_app(mem, KEYS, worker_settings=settings)) as client:
            for n in range(6):
                body = session("ana", f"Note number {n}.", sid=f"s{n}")
                assert client.post("/v1/sessions", json=body, headers=HA).status_code == 202
            assert client.app.state.worker.wait_idle(30)  # type: ignore[attr-defined]
    order = [int(p.split("Note number ")[1][0]) for p in seen]
    assert order == list(range(6))
    recs = mem.store.list_sessions(internal_user("a", "ana"))
    assert [r.status for r in recs] == ["applied"] * 6


# --- SIGTERM of a worker process whose model hangs -------------------------------------------
@pytest.mark.timeout(120)
def test_sigterm_stops_a_worker_with_a_hung_model_in_seconds_leaving_the_session_pending(
    tmp_path: Path, embedder: Embedder
) -> None:
    db = tmp_path / "w.db"
    with Memory(str(db), llm="tiny", embedder=embedder) as mem:
        mem.log_session([{"role": "user", "content": "HANG"}], user_id="ana", session_id="s1")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    with LLMStub(hang=slow_if_hang) as llm:
        cmd = [sys.executable, "-m", "deltamem", "--db", str(db), "--llm", llm.spec]
        proc = subprocess.Popen(
            [*cmd, "--llm-timeout", "120", "worker"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            assert wait_for(lambda: llm.hanging == 1, 60, step=0.1), "never called the model"
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            spent = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    out = proc.stdout.read().decode() if proc.stdout else ""
    print(f"worker exited {proc.returncode} {spent:.2f}s after SIGTERM")
    assert spent < 6, out[-2000:]
    with Memory(str(db), llm="tiny", embedder=embedder) as mem:
        [rec] = mem.store.list_sessions()
        assert rec.status == "pending" and rec.attempts == 0, rec
        assert mem.store.list_leases() == []
