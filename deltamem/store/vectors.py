"""Per-user matrices of memory vectors, kept in process memory for exact search.

A bank is loaded once and reused while its version is unchanged; the store bumps
the version in the same transaction as every write, so a reader in any process
sees a stale matrix only until its next query. A bank may also hold the rows'
keyword postings (`keywords.TermIndex`), loaded in the same snapshot; a reload is
handed the bank it replaces, so that row texts already tokenized are not tokenized
again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from deltamem.store.keywords import TermIndex
from deltamem.types import SearchFilters


class OneBlasThread:
    """Runs the bank's matrix-vector products on one BLAS thread, then gives BLAS back
    its setting (once the last search in flight is done).

    The product is a pass over the matrix that memory bandwidth bounds; OpenBLAS
    splits it over every core, and where another process (the local LLM) holds a
    core, each product waits for a thread that is not running: on a 2-core machine
    with the LLM busy, 8 ms instead of 1.6 ms at 10k rows (p50). Each row's score is
    the same bits on one thread or several (the split is by rows). DELTAMEM_BLAS_THREADS
    sets another count; 0 leaves BLAS alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._limiter: Any = None
        self._controller: ThreadpoolController | None = None

    def __enter__(self) -> None:
        threads = int(os.environ.get("DELTAMEM_BLAS_THREADS", "1"))
        with self._lock:
            if self._inside == 0 and threads > 0:
                if self._controller is None:
                    self._controller = ThreadpoolController()
                self._limiter = self._controller.limit(limits=threads, user_api="blas")
            self._inside += 1

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


ONE_BLAS_THREAD = OneBlasThread()

# Rows (both tiers together) from which a search computes the two tiers' products
# on two threads. Each product runs on one BLAS thread and is bound by that core (two
# 100k x 384 products: 20.7 ms one after the other, 10.6 ms side by side on the
# 2-core VM); below this, handing one to another thread costs more than it saves.
PARALLEL_ROWS = 40_000
_POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="deltamem-bank")
A = TypeVar("A")
B = TypeVar("B")


def side_by_side(first: Callable[[], A], second: Callable[[], B], rows: int) -> tuple[A, B]:
    """(first(), second()): the first on a pool thread where `rows` reaches
    PARALLEL_ROWS, so that the numpy work of the two (which frees the GIL) overlaps;
    else one after the other."""
    if rows < PARALLEL_ROWS:
        return first(), second()
    pending = _POOL.submit(first)
    b = second()
    return pending.result(), b


@dataclass
class Bank:
    version: int
    ids: list[str]
    matrix: np.ndarray  # (n, dim) float32, unit rows
    agent: np.ndarray  # object arrays used for filter masks
    mtype: np.ndarray
    session: np.ndarray
    ts: np.ndarray  # float64 epoch seconds
    rowids: np.ndarray | None = None  # int64, ascending (the rows' order)
    terms: TermIndex | None = None  # keyword postings of the same rows

    def mask(self, agent_id: str | None, filters: SearchFilters | None) -> np.ndarray | None:
        """Rows in scope, or None where every row is."""
        if agent_id is None and filters is None:
            return None
        mask = np.ones(len(self.ids), dtype=bool)
        if agent_id is not None:
            mask &= self.agent == agent_id
        if filters is not None:
            if filters.since is not None:
                mask &= self.ts >= filters.since.timestamp()
            if filters.until is not None:
                mask &= self.ts <= filters.until.timestamp()
            if filters.memory_type is not None:
                mask &= self.mtype == filters.memory_type
            if filters.session_id is not None:
                mask &= self.session == filters.session_id
        return mask

    def search(
        self,
        vector: np.ndarray,
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
    ) -> list[tuple[str, float]]:
        if not self.ids or k <= 0:
            return []
        with ONE_BLAS_THREAD:
            scores = self.matrix @ np.asarray(vector, dtype=np.float32)
        mask = self.mask(agent_id, filters)
        if mask is not None and not mask.all():
            scores = np.where(mask, scores, -np.inf)
        k = min(k, len(self.ids) if mask is None else int(mask.sum()))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in top]


Loader = Callable[[str, Bank | None], Bank]  # (user id, the bank it replaces)


class VectorCache:
    def __init__(self, max_users: int = 64) -> None:
        self.max_users = max_users
        self._banks: OrderedDict[str, Bank] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: str, version: int, load: Loader) -> Bank:
        with self._lock:
            bank = self._banks.get(user_id)
            if bank is not None and bank.version == version:
                self._banks.move_to_end(user_id)
                return bank
        bank = load(user_id, bank)
        with self._lock:
            self._banks[user_id] = bank
            self._banks.move_to_end(user_id)
            while len(self._banks) > self.max_users:
                self._banks.popitem(last=False)
        return bank

    def peek(self, user_id: str) -> Bank | None:
        """The user's bank as cached, whatever its version."""
        with self._lock:
            return self._banks.get(user_id)

    def drop(self, user_id: str) -> None:
        """Forget the user's bank (the user was forgotten)."""
        with self._lock:
            self._banks.pop(user_id, None)

    def clear(self) -> None:
        with self._lock:
            self._banks.clear()
