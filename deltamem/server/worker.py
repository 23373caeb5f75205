"""The background worker: applies the sessions waiting in the session log.

The API only logs a session (durably, before answering 202); this worker does the
LLM work. It is one thread in the server process that

* processes pending sessions in log order (so each user's sessions apply in the
  order they arrived), one at a time;
* is at-least-once with idempotent application: a session is planned, then
  applied in one transaction that also marks it applied, so a crash before the
  commit leaves it pending and it is planned again, and a session already applied
  is never applied twice (no duplicate memories when a job runs again);
* retries a failing session `max_attempts` times with exponential backoff, then
  parks it as ``failed`` with its error in the log; a parked session stays out of
  the queue until `request_retry` (``POST /v1/jobs/{id}/retry``) puts it back. A
  parked session does not hold back the user's later sessions;
* is restart-safe: the queue *is* the log, so on start it resumes whatever is
  pending (and failed sessions that still had tries left), and a job's status is
  read back from the log (pending / applied / failed, error, operations).

A retry request lives in memory until the worker takes it: after a restart the
session is still ``failed`` and the retry must be asked again. One worker thread
serves one store. Several worker processes sharing a store (PostgreSQL) need
leases on sessions (claim with an expiry, heartbeat, reclaim on expiry); that is
a later step, as is a durable ``failed → pending`` transition in the Store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from deltamem.memory import Memory, SessionFailed
from deltamem.server import scope
from deltamem.server.config import WorkerSettings
from deltamem.server.schemas import JobOut, JobStatus
from deltamem.types import AddResult, SessionRecord

log = logging.getLogger("deltamem.worker")

SessionKey = tuple[str, str, str | None]  # (internal user id, session id, agent id)


def key_of(rec: SessionRecord) -> SessionKey:
    return (rec.user_id, rec.session_id, rec.agent_id)


@dataclass
class WorkerStats:
    applied: int = 0
    failed: int = 0
    attempts: int = 0
    last_error: str | None = None
    started_at: float | None = None


class Worker:
    def __init__(self, memory: Memory, settings: WorkerSettings | None = None) -> None:
        self.memory = memory
        self.settings = settings or WorkerSettings()
        self.stats = WorkerStats()
        # held while one session is planned and applied, or while a user's bank is
        # reset for replay: the two never interleave
        self._lock = threading.RLock()
        self._llm_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._state = threading.Condition()
        self._busy = False
        self._current: SessionKey | None = None
        self._retry: deque[SessionKey] = deque()
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.stats.started_at = time.time()
        self._thread = threading.Thread(target=self._run, name="deltamem-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the session in hand (a session cut short stays pending)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        log.info("worker started")
        try:
            self._resume_interrupted()
        except Exception:
            log.exception("cannot read the failed sessions of the log")
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_once()
            except Exception:  # the loop must survive anything a session throws at it
                log.exception("worker loop error")
                self._stop.wait(self.settings.poll_interval)
            self._wake.wait(self.settings.poll_interval)
        log.info("worker stopped")

    def _resume_interrupted(self) -> None:
        """Queue again the failed sessions that had tries left when the last process
        stopped (stopped during a backoff); sessions that used them all stay parked."""
        for rec in self.memory.store.list_sessions(status="failed"):
            if rec.attempts < self.settings.max_attempts:
                self.request_retry(key_of(rec))

    # --- the queue -----------------------------------------------------------------
    def request_retry(self, key: SessionKey) -> None:
        """Queue a parked (failed) session for another try."""
        with self._state:
            if key not in self._retry:
                self._retry.append(key)
        self.wake()

    def current(self) -> SessionKey | None:
        return self._current

    def job_state(self, key: SessionKey) -> str | None:
        """ "queued" (a retry waits), "running" (in hand, or between tries) or None.
        Read this before the session's record: a job leaves these states only after
        its outcome is in the log."""
        with self._state:
            if self._current == key:
                return "running"
            if key in self._retry:
                return "queued"
        return None

    def job(self, key: SessionKey) -> JobOut | None:
        """A job as the log and the worker see it now (blocking: call it in a thread)."""
        state = self.job_state(key)  # first: see the docstring of `job_state`
        rec = self.memory.store.get_session(*key)
        if rec is None:
            return None
        _, user = scope.external_user(rec.user_id)
        status: JobStatus = rec.status
        if rec.status != "applied" and state == "running":
            status = "running"  # in hand, or waiting to be tried again
        queued = rec.status != "applied" and state == "queued"
        if queued:
            status = "pending"
        ops = self.memory.store.session_operations(*key) if rec.status == "applied" else None
        return JobOut(
            job_id=scope.job_id(user, rec.session_id, rec.agent_id),
            user_id=user,
            session_id=rec.session_id,
            agent_id=rec.agent_id,
            status=status,
            error=rec.error,
            attempts=rec.attempts,
            timestamp=rec.timestamp,
            operations=ops,
            retry_queued=queued,
        )

    def _set_current(self, key: SessionKey | None) -> None:
        with self._state:
            self._current = key

    def run_once(self) -> int:
        """Process what is waiting now: retry requests, then pending sessions in log
        order. Returns how many sessions were handled."""
        done = 0
        with self._state:
            self._busy = True
        try:
            while not self._stop.is_set():
                with self._state:
                    key = self._retry.popleft() if self._retry else None
                    if key is not None:
                        self._current = key  # never seen neither queued nor running
                if key is None:
                    break
                done += self._in_order(key)
            for rec in self.memory.store.list_sessions(status="pending"):
                if self._stop.is_set():
                    break
                done += self._in_order(key_of(rec))
        finally:
            with self._state:
                self._busy = False
                self._state.notify_all()
        return done

    def _in_order(self, key: SessionKey) -> int:
        """Handle a session after the same user's earlier pending ones (a replay may
        have put earlier sessions back in the queue since the queue was read)."""
        user, session, agent = key
        rec = self.memory.store.get_session(user, session, agent)
        if rec is None or rec.status == "applied":
            return 0
        done = 0
        for earlier in self.memory.store.list_sessions(user, status="pending"):
            if earlier.seq < rec.seq and earlier.agent_id == rec.agent_id:
                self._handle(key_of(earlier))
                done += 1
        self._handle(key)
        return done + 1

    def _handle(self, key: SessionKey) -> AddResult | None:
        """Process one session with retries; park it as failed if every try fails."""
        self._set_current(key)  # "running" for its whole turn, backoff included
        try:
            return self._attempts(key)
        finally:
            self._set_current(None)

    def _attempts(self, key: SessionKey) -> AddResult | None:
        user, session, agent = key
        s = self.settings
        for attempt in range(max(1, s.max_attempts)):
            self.stats.attempts += 1
            try:
                self.ensure_llm()
                with self._lock:
                    result = self.memory.retry(session, user_id=user, agent_id=agent)
            except KeyError:  # gone from the log (the user was reset): nothing to do
                return None
            except Exception as exc:
                done = self._applied_meanwhile(key)
                if done is not None:
                    # another worker applied it between our read and our commit; the
                    # store refused the second apply, so this is success, not a failure
                    return done
                error = (
                    str(exc) if isinstance(exc, SessionFailed) else (f"{type(exc).__name__}: {exc}")
                )
                if not isinstance(exc, SessionFailed):
                    # Memory marks LLM failures itself; anything else we mark here
                    log.exception("session %r of %r failed", session, user)
                    self.memory.store.mark_failed(user, session, agent, error)
                self.stats.last_error = error
                last = attempt + 1 >= s.max_attempts
                log.warning(
                    "session %r of %r failed (try %d of %d)%s: %s",
                    session,
                    user,
                    attempt + 1,
                    s.max_attempts,
                    "; parked" if last else "",
                    error,
                )
                if last or self._stop.wait(s.backoff * 2**attempt):
                    self.stats.failed += 1
                    return None
                continue
            if not result.already_applied:
                self.stats.applied += 1
            return result
        return None

    def _applied_meanwhile(self, key: SessionKey) -> AddResult | None:
        """The session's result if the log says it is applied (by another worker)."""
        try:
            rec = self.memory.store.get_session(*key)
            if rec is None or rec.status != "applied":
                return None
            ops = self.memory.store.session_operations(*key)
        except Exception:  # the store itself is failing: report the original error
            return None
        log.info("session %r of %r was applied by another worker", key[1], key[0])
        return AddResult(
            session_id=rec.session_id, status="applied", operations=ops, already_applied=True
        )

    # --- for the API, the MCP server and tests ---------------------------------------
    def ensure_llm(self) -> None:
        """Build the memory's LLM once, whichever thread asks first (`Memory.llm` is
        lazy and unguarded: two threads at once would load two models)."""
        with self._llm_lock:
            _ = self.memory.llm

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off the worker (e.g. while a user's memory is reset for replay)."""
        with self._lock:
            yield

    def process_now(self, rec: SessionRecord) -> AddResult:
        """Apply one logged session in the calling thread (after the same user's
        earlier pending sessions), under the worker's lock. Raises SessionFailed."""
        self.ensure_llm()
        with self._lock:
            for earlier in self.memory.store.list_sessions(rec.user_id, status="pending"):
                if earlier.seq < rec.seq and earlier.agent_id == rec.agent_id:
                    self._handle(key_of(earlier))
            self._set_current(key_of(rec))
            try:
                return self.memory.retry(rec.session_id, user_id=rec.user_id, agent_id=rec.agent_id)
            finally:
                self._set_current(None)

    def idle(self) -> bool:
        with self._state:
            if self._busy or self._retry:
                return False
        return not self.memory.store.list_sessions(status="pending")

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until nothing is pending, queued or in hand; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle():
                return True
            self.wake()
            time.sleep(0.01)
        return self.idle()

    def describe(self) -> dict[str, object]:
        return {
            "running": self.running,
            "busy": self._busy,
            "applied": self.stats.applied,
            "failed": self.stats.failed,
            "queued_retries": len(self._retry),
        }
