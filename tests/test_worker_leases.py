"""User leases between workers: a held user is skipped, a long LLM call keeps its
lease alive, a crashed holder's lease expires and another worker takes the user
over, a retry request is durable, and a replay waits for the session in hand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fakes import ScriptedLLM, add, ops

from deltamem.memory import Memory
from deltamem.server.config import WorkerSettings
from deltamem.server.lease import LeaseBusy, UserLease
from deltamem.server.worker import Worker

FAST = WorkerSettings(poll_interval=0.02, max_attempts=2, backoff=0.01, lease_seconds=0.6)


def log(mem: Memory, user: str, sid: str, text: str = "I like tea.") -> None:
    mem.log_session([{"role": "user", "content": text}], user_id=user, session_id=sid)


def test_a_user_whose_lease_is_held_elsewhere_is_skipped(
    make_memory: Callable[..., Memory],
) -> None:
    mem = make_memory(ScriptedLLM(default=ops(add("Alice likes tea."))))
    log(mem, "alice", "s1")
    log(mem, "bob", "s1")
    other = UserLease(mem.store, "alice", "another-process", ttl=30)
    assert other.try_acquire()
    try:
        worker = Worker(mem, FAST)
        assert worker.run_once() == 1  # bob only
        assert mem.store.get_session("alice", "s1").status == "pending"  # type: ignore[union-attr]
        assert mem.store.get_session("bob", "s1").status == "applied"  # type: ignore[union-attr]
    finally:
        other.release()
    assert worker.run_once() == 1
    assert mem.store.get_session("alice", "s1").status == "applied"  # type: ignore[union-attr]


def test_a_crashed_holders_lease_expires_and_the_user_is_taken_over(
    make_memory: Callable[..., Memory],
) -> None:
    mem = make_memory(ScriptedLLM(default=ops(add("Alice likes tea."))))
    log(mem, "alice", "s1")
    # a worker took the lease and died: nobody renews it
    assert mem.store.acquire_lease("alice", "dead-worker", ttl=0.3)
    worker = Worker(mem, FAST)
    assert worker.run_once() == 0
    time.sleep(0.4)
    assert worker.run_once() == 1
    assert mem.store.get_session("alice", "s1").status == "applied"  # type: ignore[union-attr]


def test_the_heartbeat_keeps_a_lease_through_a_call_longer_than_its_ttl(
    make_memory: Callable[..., Memory],
) -> None:
    started = threading.Event()

    def slow(messages: list[dict[str, str]]) -> Any:
        started.set()
        time.sleep(3 * FAST.lease_seconds)  # three lease lifetimes
        return ops(add("Alice likes tea."))

    llm = ScriptedLLM(default=slow)
    mem = make_memory(llm)
    log(mem, "alice", "s1")
    first, second = Worker(mem, FAST), Worker(mem, FAST)
    t = threading.Thread(target=first.run_once)
    t.start()
    assert started.wait(5)
    try:
        for _ in range(10):  # all through the call, the second worker finds alice held
            assert second.run_once() == 0
            time.sleep(FAST.lease_seconds / 4)
    finally:
        t.join(10)
    assert len(llm.requests) == 1  # the session was planned once
    assert mem.store.get_session("alice", "s1").status == "applied"  # type: ignore[union-attr]


def test_a_retry_request_is_durable_for_any_worker(make_memory: Callable[..., Memory]) -> None:
    llm = ScriptedLLM(default=RuntimeError("model crashed"))
    mem = make_memory(llm)
    user = "acme:alice"  # the API's tenant-scoped user id
    log(mem, user, "s1")
    Worker(mem, FAST).run_once()
    rec = mem.store.get_session(user, "s1")
    assert rec is not None and rec.status == "failed" and rec.attempts == FAST.max_attempts
    # asked through one worker (say, the API process's) ...
    assert Worker(mem, FAST).request_retry((user, "s1", None)) is True
    job = Worker(mem, FAST).job((user, "s1", None))
    assert job is not None and job.status == "pending" and job.retry_queued
    # ... and done by another (another process, after a restart: it is in the log)
    llm.default = ops(add("Alice likes tea."))
    assert Worker(mem, FAST).run_once() == 1
    rec = mem.store.get_session(user, "s1")
    assert rec is not None and rec.status == "applied" and rec.error is None
    assert Worker(mem, FAST).request_retry((user, "s1", None)) is False  # applied: no-op


def test_replay_waits_for_the_session_in_hand_or_gives_up_clearly(
    make_memory: Callable[..., Memory],
) -> None:
    mem = make_memory(ScriptedLLM(default=ops(add("Alice likes tea."))))
    holder = UserLease(mem.store, "alice", "busy-worker", ttl=30)
    assert holder.try_acquire()
    impatient = Worker(mem, WorkerSettings(lease_wait=0.2))
    with pytest.raises(LeaseBusy, match="another worker"), impatient.exclusive("alice"):
        pass
    patient = Worker(mem, WorkerSettings(lease_wait=5))
    threading.Timer(0.3, holder.release).start()
    t0 = time.monotonic()
    with patient.exclusive("alice"):
        waited = time.monotonic() - t0
        # while we hold it, no worker plans alice
        log(mem, "alice", "s1")
        assert Worker(mem, FAST).run_once() == 0
    assert 0.2 < waited < 5
    assert Worker(mem, FAST).run_once() == 1


def test_a_lease_of_a_killed_local_process_is_freed_at_once(
    make_memory: Callable[..., Memory],
) -> None:
    import socket
    import subprocess
    import sys

    mem = make_memory(ScriptedLLM(default=ops(add("Alice likes tea."))))
    log(mem, "alice", "s1")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead_owner = f"{socket.gethostname()}:{gone.pid}:worker:0123abcd"
    assert mem.store.acquire_lease("alice", dead_owner, ttl=300)
    # a live process's lease (ours, under another owner id) is left alone
    assert mem.store.acquire_lease("bob", f"{socket.gethostname()}:1:worker:x", ttl=300)
    assert Worker(mem, FAST).run_once() == 1
    assert mem.store.get_session("alice", "s1").status == "applied"  # type: ignore[union-attr]
    assert [u for u, _ in mem.store.list_leases()] == ["bob"]


def test_the_worker_thread_runs_at_a_lower_priority(make_memory: Callable[..., Memory]) -> None:
    import os

    if not hasattr(os, "setpriority"):
        pytest.skip("no per-thread priority here")
    mem = make_memory(ScriptedLLM(default=ops(add("Alice likes tea."))))
    seen: list[int] = []

    def spy(messages: list[dict[str, str]]) -> Any:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return ops(add("Alice likes tea."))

    mem.llm.default = spy  # type: ignore[attr-defined]
    worker = Worker(mem, WorkerSettings(poll_interval=0.02, nice=7))
    base = os.getpriority(os.PRIO_PROCESS, 0)
    worker.start()
    try:
        log(mem, "alice", "s1")
        worker.wake()
        assert worker.wait_idle(10)
    finally:
        worker.stop()
    assert seen and seen[0] == min(base + 7, 19)
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the caller's thread is untouched
