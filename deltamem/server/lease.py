"""A user's lease in the store, held while one session of that user is processed.

Workers in several processes (or on several machines, with PostgreSQL) share one
session log. Before planning a user's next session a worker takes the user's lease;
the others skip that user until it is released. A heartbeat thread renews the lease
while the LLM works, so a long call does not lose it, and a worker that dies simply
stops renewing: its lease expires and another worker takes the user over.

The lease saves duplicate LLM work and keeps a user's sessions in order; it is not
what makes application exactly-once. That is the store's job: `apply_session`
refuses a session that is already applied, so even a worker that lost its lease
while stalled cannot apply a session twice.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from types import TracebackType

from deltamem.store.base import Store

log = logging.getLogger("deltamem.worker")


def new_owner(role: str = "worker") -> str:
    """A lease owner id that says where it runs: host, process, role, a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


def held_by_dead_local_process(owner: str) -> bool:
    """True if `owner` names a process on this host that no longer exists (killed
    or crashed): its leases need not wait out their expiry. A process in another
    PID namespace under the same host name could be misread as dead; the cost is
    only duplicate LLM work, as the store still refuses a second apply."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def free_dead_local_leases(store: Store) -> int:
    """Release the leases of this host's dead processes; returns how many."""
    freed = 0
    for user_id, owner in store.list_leases():
        if held_by_dead_local_process(owner):
            store.release_lease(user_id, owner)
            log.info("freed the lease on %r of dead process %s", user_id, owner)
            freed += 1
    return freed


class LeaseBusy(RuntimeError):
    """Another worker holds the user's lease (it is processing one of their sessions)."""


class UserLease:
    def __init__(self, store: Store, user_id: str, owner: str, ttl: float = 30.0) -> None:
        if ttl <= 0:
            raise ValueError("a lease needs a positive ttl")
        self.store, self.user_id, self.ttl = store, user_id, ttl
        # one owner id per acquisition: two holders in one process never share a lease
        self.owner = f"{owner}/{uuid.uuid4().hex[:6]}"
        self.lost = threading.Event()
        self._done = threading.Event()
        self._beat: threading.Thread | None = None

    def try_acquire(self) -> bool:
        if not self.store.acquire_lease(self.user_id, self.owner, self.ttl):
            return False
        self._start_heartbeat()
        return True

    def acquire(self, wait: float, stop: threading.Event | None = None) -> bool:
        """Poll for the lease up to `wait` seconds (or until `stop` is set)."""
        deadline = time.monotonic() + wait
        pause = 0.05
        while True:
            if self.try_acquire():
                return True
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    def _start_heartbeat(self) -> None:
        self._done.clear()
        self._beat = threading.Thread(
            target=self._heartbeat, name=f"lease-{self.user_id[:24]}", daemon=True
        )
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._done.wait(self.ttl / 3):
            try:
                held = self.store.renew_lease(self.user_id, self.owner, self.ttl)
            except Exception:  # a store hiccup: try again at the next beat
                log.warning("could not renew the lease on %r", self.user_id, exc_info=True)
                continue
            if not held:
                log.warning("lost the lease on %r (expired; another worker took it)", self.user_id)
                self.lost.set()
                return

    def release(self) -> None:
        self._done.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        try:
            self.store.release_lease(self.user_id, self.owner)
        except Exception:  # it expires on its own
            log.warning("could not release the lease on %r", self.user_id, exc_info=True)

    def __enter__(self) -> UserLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
