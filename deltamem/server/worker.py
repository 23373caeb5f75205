"""The background worker: applies the sessions waiting in the session log.

The API only logs a session (durably, before answering 202); workers do the LLM
work. A worker is `concurrency` threads; `deltamem serve` runs one next to the API
and `deltamem worker` runs more in other processes (or, with PostgreSQL, on other
machines), all sharing the log as their queue. Each worker

* goes through the users with pending sessions and, holding the user's lease
  (`deltamem.server.lease`), processes that user's oldest pending session; the
  lease keeps the other workers (and this worker's other threads) off the user
  meanwhile, so a user's sessions apply in the order they arrived and no LLM work
  is spent twice, while different users are processed at once: one user's hung
  model holds back only that user;
* is at-least-once with idempotent application: a session is planned, then
  applied in one transaction that also marks it applied, so a crash before the
  commit leaves it pending and it is planned again, and a session already applied
  is never applied twice (no duplicate memories when a job runs again);
* retries a failing session `max_attempts` times with exponential backoff, then
  parks it as ``failed`` with its error in the log; a parked session stays out of
  the queue until `request_retry` (``POST /v1/jobs/{id}/retry``) puts it back,
  durably, for every worker. A parked session does not hold back the user's later
  sessions;
* is restart-safe: the queue *is* the log, so on start it resumes whatever is
  pending (and failed sessions that still had tries left), and a job's status is
  read back from the log (pending / applied / failed, error, operations);
* stops within `stop_grace` seconds: a session still in an LLM call then is left
  uncommitted, pending, for the next worker, and its lease is given up;
* indexes the turns of sessions logged unindexed (the REST API logs a session
  without embedding it, so that even a big one is acknowledged at once) before it
  processes anything, one session per transaction (`Memory.index_logged`);
* lets a job be cancelled (`cancel`, ``DELETE /v1/jobs/{id}``) and a user be
  forgotten without waiting for it: the session is withdrawn from the log, so the
  store refuses the apply of a worker planning it meanwhile, and that worker drops
  the result (and the calls its try logged) instead of failing the session.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from deltamem.memory import Memory, SessionFailed
from deltamem.server import scope
from deltamem.server.config import WorkerSettings
from deltamem.server.lease import LeaseBusy, UserLease, free_dead_local_leases, new_owner
from deltamem.server.schemas import JobOut, JobStatus
from deltamem.types import AddResult, SessionRecord, SessionStatus

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
    swept: int = 0  # expired memories this worker deleted (settings.sweep_every)


class Worker:
    def __init__(self, memory: Memory, settings: WorkerSettings | None = None) -> None:
        self.memory = memory
        self.settings = settings or WorkerSettings()
        self.stats = WorkerStats()
        # per user: held while one of their sessions is planned and applied, or while
        # their bank is reset for replay, so the two never interleave in this process
        self._user_locks: dict[str, threading.RLock] = {}
        self._llm_lock = threading.Lock()
        self._index_lock = threading.Lock()  # one thread indexes logged sessions at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._state = threading.Condition()  # guards the fields below and `stats`
        self._busy = 0  # threads inside run_once
        self._in_hand: set[SessionKey] = set()
        self._leases: set[UserLease] = set()  # held by this worker's threads now
        self.owner = new_owner()
        self._threads: list[threading.Thread] = []
        # called after each job's turn: (session, its result or None, seconds taken)
        self._job_listeners: list[Callable[[SessionKey, AddResult | None, float], None]] = []

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self.stats.started_at = time.time()
        self._threads = [
            threading.Thread(target=self._run, args=(n,), name=f"deltamem-worker-{n}", daemon=True)
            for n in range(max(1, self.settings.concurrency))
        ]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop within `timeout` seconds (default: `stop_grace`). Sessions in hand
        that finish by then are applied; one still in an LLM call is abandoned: its
        thread (a daemon) is left to end with the process, nothing of it has been
        committed so it stays pending, and its lease is released so that the next
        worker can take the user at once. Should the abandoned call still end while
        the process lives, its session is put back as pending, not failed."""
        self._stop.set()
        self._wake.set()
        grace = self.settings.stop_grace if timeout is None else timeout
        deadline = time.monotonic() + grace
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        self._threads = []
        if not stuck:
            return
        with self._state:
            held, in_hand = list(self._leases), sorted(k[1] for k in self._in_hand)
        log.warning(
            "stopped with %d session(s) still in hand after %.1fs (%s): left pending",
            len(stuck),
            grace,
            ", ".join(repr(k) for k in in_hand),
        )
        for lease in held:
            lease.release()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def wake(self) -> None:
        self._wake.set()

    def _run(self, n: int = 0) -> None:
        if n == 0:
            log.info("worker %s started (%d threads)", self.owner, len(self._threads))
        self._lower_priority()
        if n == 0:
            try:
                free_dead_local_leases(self.memory.store)
                self._resume_interrupted()
            except Exception:
                log.exception("cannot read the failed sessions of the log")
        next_sweep = time.monotonic()
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_once()
                if n == 0 and self.settings.sweep_every and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.settings.sweep_every
                    self.sweep()
            except Exception:  # the loop must survive anything a session throws at it
                log.exception("worker loop error")
                self._stop.wait(self.settings.poll_interval)
            self._wake.wait(self.settings.poll_interval)
        if n == 0:
            log.info("worker stopped")

    def _lower_priority(self) -> None:
        """Run this thread (and the LLM threads it starts, which inherit it) at a
        lower CPU priority, so that on a small machine the API next to it keeps
        answering in milliseconds while the LLM works. Linux: per-thread nice."""
        if self.settings.nice and hasattr(os, "setpriority"):
            try:
                tid = threading.get_native_id()
                current = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, current + self.settings.nice))
            except OSError:
                log.info("could not lower the worker's CPU priority", exc_info=True)

    def _resume_interrupted(self) -> None:
        """Queue again the failed sessions that had tries left when their worker
        stopped (stopped during a backoff); sessions that used them all stay parked.
        A user whose lease is held is being handled by a live worker: left alone."""
        for rec in self.memory.store.list_sessions(status="failed"):
            if rec.attempts >= self.settings.max_attempts:
                continue
            lease = self._lease(rec.user_id)
            if lease.try_acquire():
                with lease:
                    self.memory.store.requeue_session(*key_of(rec))

    def sweep(self) -> int:
        """Delete the memories whose expiry has passed (every user's); how many. A
        session being applied meanwhile that updates one of them fails that try and
        is planned again."""
        gone = self.memory.sweep_expired()
        if gone:
            log.info("swept %d expired memories", len(gone))
        self._count(swept=len(gone))
        return len(gone)

    # --- the queue -----------------------------------------------------------------
    def _lease(self, user_id: str) -> UserLease:
        return UserLease(self.memory.store, user_id, self.owner, self.settings.lease_seconds)

    def request_retry(self, key: SessionKey) -> bool:
        """Queue a parked (failed) session again with fresh tries, durably: any worker
        may take it. False if it was not failed (pending or applied: nothing to do)."""
        queued = self.memory.store.requeue_session(*key)
        self.wake()
        return queued

    def in_hand(self) -> set[SessionKey]:
        """The sessions this worker's threads are processing now."""
        with self._state:
            return set(self._in_hand)

    def job_state(self, key: SessionKey) -> str | None:
        """ "running" while this worker has the session in hand (between tries
        included), else None. Read this before the session's record: a job leaves
        this state only after its outcome is in the log."""
        with self._state:
            return "running" if key in self._in_hand else None

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
        # a requeued session keeps its last error until it applies
        queued = status == "pending" and rec.error is not None
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

    @contextmanager
    def _holding(self, key: SessionKey) -> Iterator[None]:
        """Mark the session as in hand ("running") for the duration."""
        with self._state:
            self._in_hand.add(key)
        try:
            yield
        finally:
            with self._state:
                self._in_hand.discard(key)

    def _user_lock(self, user_id: str) -> threading.RLock:
        with self._state:
            return self._user_locks.setdefault(user_id, threading.RLock())

    @contextmanager
    def _held(self, lease: UserLease) -> Iterator[UserLease]:
        """Hold an acquired lease until the block ends (or `stop` gives it up)."""
        with self._state:
            self._leases.add(lease)
        try:
            with lease:
                yield lease
        finally:
            with self._state:
                self._leases.discard(lease)

    def run_once(self) -> int:
        """Process what is waiting now, user by user in order of their oldest pending
        session, skipping users another worker holds. Returns how many sessions
        were handled."""
        done = 0
        with self._state:
            self._busy += 1
        try:
            free_dead_local_leases(self.memory.store)  # e.g. left by a kill -9
            try:
                self.index_logged()
            except Exception:  # e.g. the embedder is down: the sessions still apply
                log.exception("could not index the logged sessions; tried again next pass")
            pending = self.memory.store.list_sessions(status="pending")
            for user in dict.fromkeys(rec.user_id for rec in pending):
                if self._stop.is_set():
                    break
                done += self._drain(user)
        finally:
            with self._state:
                self._busy -= 1
                self._state.notify_all()
        return done

    def index_logged(self) -> int:
        """Index the sessions logged without their episodes (`Memory.index_logged`),
        unless another of this worker's threads is at it. Returns how many."""
        if not self._index_lock.acquire(blocking=False):
            return 0
        try:
            return self.memory.index_logged(stop=self._stop.is_set)
        finally:
            self._index_lock.release()

    def _drain(self, user: str) -> int:
        """The user's pending sessions, oldest first, one lease per session (so a
        replay or a synchronous add waits for one session, not the whole queue)."""
        done = 0
        tried: set[SessionKey] = set()
        while not self._stop.is_set():
            lease = self._lease(user)
            if not lease.try_acquire():
                break  # another worker (or another of our threads) is on this user
            with self._held(lease):
                pending = self.memory.store.list_sessions(user, status="pending")
                if not pending or key_of(pending[0]) in tried:
                    break  # done, or it stayed pending (stopped mid-backoff)
                key = key_of(pending[0])
                tried.add(key)
                self._handle(key)
                done += 1
        return done

    def on_job(self, listener: Callable[[SessionKey, AddResult | None, float], None]) -> None:
        """Call `listener` after each session this worker processes, with the result
        (None: not applied, e.g. parked as failed) and the seconds its turn took,
        tries and backoff included (e.g. for metrics)."""
        self._job_listeners.append(listener)

    def _report(self, key: SessionKey, result: AddResult | None, seconds: float) -> None:
        for listener in self._job_listeners:
            try:
                listener(key, result, seconds)
            except Exception:  # a broken listener must not break the queue
                log.exception("job listener failed")

    def _handle(self, key: SessionKey) -> AddResult | None:
        """Process one session with retries; park it as failed if every try fails."""
        started = time.monotonic()
        result = None
        try:
            with self._holding(key):  # "running" for its whole turn, backoff included
                result = self._attempts(key)
                return result
        finally:
            self._report(key, result, time.monotonic() - started)

    def _attempts(self, key: SessionKey) -> AddResult | None:
        user, session, agent = key
        s = self.settings
        for attempt in range(max(1, s.max_attempts)):
            rec = self.memory.store.get_session(*key)
            if rec is None:  # gone from the log (cancelled, the user forgotten)
                return None
            self._count(attempts=1)
            try:
                self.ensure_llm()
                with self._user_lock(user):
                    result = self.memory.retry(session, user_id=user, agent_id=agent)
            except KeyError:  # gone from the log (the user was reset): nothing to do
                return None
            except Exception as exc:
                done = self._applied_meanwhile(key)
                if done is not None:
                    # another worker applied it between our read and our commit; the
                    # store refused the second apply, so this is success, not a failure
                    return done
                if self._withdrawn(rec):
                    return None
                if self._stop.is_set():
                    self._left_for_next(key, exc)
                    return None
                error = (
                    str(exc) if isinstance(exc, SessionFailed) else (f"{type(exc).__name__}: {exc}")
                )
                if not isinstance(exc, SessionFailed):
                    # Memory marks LLM failures itself; anything else we mark here
                    log.exception("session %r of %r failed", session, user)
                    self.memory.store.mark_failed(user, session, agent, error)
                self._count(last_error=error)
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
                    self._count(failed=1)
                    return None
                continue
            if not result.already_applied:
                self._count(applied=1)
            return result
        return None

    def _count(
        self,
        applied: int = 0,
        failed: int = 0,
        attempts: int = 0,
        last_error: str | None = None,
        swept: int = 0,
    ) -> None:
        with self._state:
            self.stats.swept += swept
            self.stats.applied += applied
            self.stats.failed += failed
            self.stats.attempts += attempts
            if last_error is not None:
                self.stats.last_error = last_error

    def _left_for_next(self, key: SessionKey, exc: Exception) -> None:
        """An attempt that ended after `stop` (abandoned mid-call): not the session's
        fault, so it goes back to pending for the next worker, tries intact."""
        log.info("session %r of %r cut short by the stop (%s): left pending", key[1], key[0], exc)
        try:
            self.memory.store.requeue_session(*key)
        except Exception:  # the store is closing with the process: it is pending or failed
            log.info("could not put session %r back as pending", key[1], exc_info=True)
        return None

    def _withdrawn(self, rec: SessionRecord) -> bool:
        """True if the session was cancelled (or its user forgotten) while in hand:
        its log entry is gone, or is another entry logged since under the same id.
        The try's result is dropped, and the model calls it logged after the entry
        went are removed with it."""
        try:
            now = self.memory.store.get_session(*key_of(rec))
            if now is not None and now.seq == rec.seq:
                return False
            if now is None:  # no entry: its calls alone (one logged since stays, calls too)
                self.memory.store.cancel_session(*key_of(rec), seq=rec.seq)
        except Exception:  # the store itself is failing: report the original error
            return False
        log.info(
            "session %r of %r was cancelled while in hand: dropped", rec.session_id, rec.user_id
        )
        return True

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
    def exclusive(self, user_id: str) -> Iterator[None]:
        """Hold every worker (of any process) off one user, e.g. while their memory
        is reset for replay. Waits for the session in hand to finish; LeaseBusy if
        that takes longer than `lease_wait` seconds."""
        lease = self._lease(user_id)
        if not lease.acquire(self.settings.lease_wait):
            raise LeaseBusy(f"user {user_id!r} is being processed by another worker; try again")
        with self._held(lease), self._user_lock(user_id):
            yield

    def cancel(self, key: SessionKey) -> SessionStatus | None:
        """Cancel a job that is not applied: its session is withdrawn from the log,
        with its episodes and model calls (`Store.cancel_session`). A job in hand
        (running, here or in another worker) is not waited for: its apply is refused
        and its worker drops the result. Returns the status the session had
        ("applied": nothing was done; None: no such session)."""
        user, session, agent = key
        return self.memory.cancel(session, user_id=user, agent_id=agent)

    @contextmanager
    def claimed(self, user_id: str) -> Iterator[bool]:
        """The user's lease if it is free now, else nothing: for a change that must
        not wait for a job in hand (forgetting the user), whose apply the store
        will refuse anyway once the user's sessions are gone. Yields whether the
        lease is held."""
        lease = self._lease(user_id)
        if not lease.try_acquire():
            yield False
            return
        with self._held(lease):
            yield True

    def forget_user(self, user_id: str) -> None:
        """Drop what this worker keeps of a user in memory (the user was forgotten)."""
        with self._state:
            self._user_locks.pop(user_id, None)

    def process_now(self, rec: SessionRecord) -> AddResult:
        """Apply one logged session in the calling thread, after the same user's
        earlier pending sessions, holding the user's lease. If another worker holds
        it, wait for that worker to apply the session. Raises SessionFailed."""
        self.ensure_llm()
        key = key_of(rec)
        deadline = time.monotonic() + self.settings.lease_wait
        while True:
            lease = self._lease(rec.user_id)
            if lease.try_acquire():
                with self._held(lease), self._holding(key):
                    for earlier in self.memory.store.list_sessions(rec.user_id, status="pending"):
                        if earlier.seq < rec.seq:
                            self._attempts(key_of(earlier))
                    started, result = time.monotonic(), None
                    try:
                        with self._user_lock(rec.user_id):
                            result = self.memory.retry(
                                rec.session_id, user_id=rec.user_id, agent_id=rec.agent_id
                            )
                            return result
                    finally:
                        self._report(key, result, time.monotonic() - started)
            done = self._applied_meanwhile(key)
            if done is not None:
                return done
            if time.monotonic() >= deadline:
                raise SessionFailed(
                    f"session {rec.session_id!r} is still queued behind another worker; "
                    "it stays in the log and will be applied"
                )
            time.sleep(0.1)

    def idle(self) -> bool:
        with self._state:
            if self._busy:
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
            "busy": self._busy > 0,
            "in_hand": len(self.in_hand()),
            "concurrency": max(1, self.settings.concurrency),
            "applied": self.stats.applied,
            "failed": self.stats.failed,
            "owner": self.owner,
        }
