"""asyncio front doors: `AsyncMemory` (the library) and `AsyncClient` (the REST API),
with the methods of `Memory` as coroutines.

    async with AsyncMemory(llm="tiny") as mem:
        await mem.add(messages, user_id="martin", session_id="s1")
        hits = await mem.search("Which films does Martin like?", user_id="martin")

`AsyncMemory` runs every `Memory` call in a worker thread (`asyncio.to_thread`), so
the event loop never waits on the LLM, the embedder or the database; the writes of
one user (add, retry, replay, reset, process_pending) run one at a time and in the
order they were awaited, as a user's sessions apply in order, while different users
are written at once. `AsyncClient` is `deltamem.client.Client` on
`httpx.AsyncClient`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Literal, TypeVar, overload

import httpx

from deltamem.answer import Answer
from deltamem.client import FINISHED, Call, Calls, Job, job_result
from deltamem.llm.base import CallRecord
from deltamem.memory import Memory
from deltamem.provenance import PERSON
from deltamem.retrieval.hybrid import Tiers
from deltamem.types import (
    AddResult,
    HistoryEntry,
    MemoryItem,
    Message,
    Operation,
    SearchFilters,
    SearchHit,
    SessionRecord,
    SessionStatus,
    Version,
)

__all__ = ["AsyncClient", "AsyncMemory"]

T = TypeVar("T")


class AsyncMemory:
    """`Memory` for asyncio. Takes `Memory`'s arguments, or an existing `memory`."""

    def __init__(self, path: Any = None, *, memory: Memory | None = None, **kwargs: Any) -> None:
        self.memory = memory if memory is not None else Memory(path, **kwargs)
        self._locks: dict[str, asyncio.Lock] = {}

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    @asynccontextmanager
    async def _writing(self, user_id: str) -> AsyncIterator[None]:
        """One writer per user: asyncio.Lock wakes its waiters in FIFO order."""
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:
            yield

    # --- write path ---------------------------------------------------------------------
    async def add(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
    ) -> AddResult:
        async with self._writing(user_id):
            return await self._run(
                self.memory.add,
                messages,
                user_id=user_id,
                session_id=session_id,
                timestamp=timestamp,
                agent_id=agent_id,
                infer=infer,
            )

    async def process_pending(self, user_id: str | None = None) -> list[AddResult]:
        """Apply the pending and deferred sessions (of every user, user by user, when
        `user_id` is None)."""
        if user_id is not None:
            async with self._writing(user_id):
                return await self._run(self.memory.process_pending, user_id)
        waiting = await self._run(self.memory.store.list_sessions)
        results: list[AddResult] = []
        for user in dict.fromkeys(r.user_id for r in waiting if r.status != "applied"):
            results += await self.process_pending(user)
        return results

    async def retry(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> AddResult:
        async with self._writing(user_id):
            return await self._run(
                self.memory.retry, session_id, user_id=user_id, agent_id=agent_id
            )

    async def replay(self, user_id: str, agent_id: str | None = None) -> list[AddResult]:
        async with self._writing(user_id):
            return await self._run(self.memory.replay, user_id, agent_id)

    async def delete(self, memory_id: str, *, actor: str = "api") -> bool:
        return await self._run(self.memory.delete, memory_id, actor=actor)

    async def edit(self, memory_id: str, content: str, *, actor: str = PERSON) -> MemoryItem | None:
        return await self._run(self.memory.edit, memory_id, content, actor=actor)

    async def reset(self, user_id: str, agent_id: str | None = None) -> int:
        async with self._writing(user_id):
            return await self._run(self.memory.reset, user_id, agent_id)

    # --- read path ----------------------------------------------------------------------
    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        return await self._run(
            self.memory.search,
            query,
            user_id=user_id,
            limit=limit,
            agent_id=agent_id,
            filters=filters,
            tiers=tiers,
        )

    async def answer(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 20,
        asked_at: str | datetime | None = None,
        tiers: Tiers = "all",
    ) -> Answer:
        return await self._run(
            self.memory.answer,
            question,
            user_id=user_id,
            agent_id=agent_id,
            limit=limit,
            asked_at=asked_at,
            tiers=tiers,
        )

    async def context(
        self,
        question: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        """What `answer` reads (`Memory.context`)."""
        return await self._run(
            self.memory.context,
            question,
            user_id=user_id,
            limit=limit,
            agent_id=agent_id,
            tiers=tiers,
        )

    async def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        return await self._run(
            self.memory.get_all, user_id=user_id, agent_id=agent_id, filters=filters, limit=limit
        )

    async def get(self, memory_id: str) -> MemoryItem | None:
        return await self._run(self.memory.get, memory_id)

    async def history(self, memory_id: str) -> list[HistoryEntry]:
        return await self._run(self.memory.history, memory_id)

    async def session_memories(
        self, session_id: str, user_id: str | None = None
    ) -> list[MemoryItem]:
        return await self._run(self.memory.session_memories, session_id, user_id)

    async def session_operations(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        return await self._run(
            self.memory.session_operations, session_id, user_id=user_id, agent_id=agent_id
        )

    async def timeline(self, memory_id: str) -> list[Version]:
        return await self._run(self.memory.timeline, memory_id)

    async def session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        return await self._run(self.memory.session, session_id, user_id=user_id, agent_id=agent_id)

    async def sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        return await self._run(self.memory.sessions, user_id, status)

    async def session_calls(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        return await self._run(
            self.memory.session_calls, session_id, user_id=user_id, agent_id=agent_id
        )

    async def users(self, prefix: str = "") -> list[str]:
        return await self._run(self.memory.users, prefix)

    async def close(self) -> None:
        await self._run(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncClient:
    """The REST API with `Memory`'s methods as coroutines (see `deltamem.Client`)."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 60.0,
        poll_interval: float = 0.2,
        wait_timeout: float = 900.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.poll_interval, self.wait_timeout = poll_interval, wait_timeout
        self._http = http or httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout
        )

    async def _send(self, call: Call[T]) -> T:
        r = await self._http.request(call.method, call.path, params=call.params, json=call.body)
        return call.result(r)

    # --- jobs ---------------------------------------------------------------------------
    async def job(self, job: str) -> Job:
        return await self._send(Calls.job(job))

    async def wait(self, job: Job | str) -> AddResult:
        current = job if isinstance(job, Job) else await self.job(job)
        first = current.status
        deadline = time.monotonic() + self.wait_timeout
        while current.status not in FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {current.job_id} still {current.status}")
            await asyncio.sleep(self.poll_interval)
            current = await self.job(current.job_id)
        return job_result(current, already_applied=first == "applied")

    # --- write path ---------------------------------------------------------------------
    @overload
    async def add(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        wait: Literal[False] = False,
    ) -> Job: ...
    @overload
    async def add(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        wait: Literal[True],
    ) -> AddResult: ...
    async def add(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        wait: bool = False,
    ) -> Job | AddResult:
        call = Calls.add(messages, user_id, session_id, timestamp, agent_id, infer)
        job = await self._send(call)
        return await self.wait(job) if wait else job

    async def retry(
        self, session_id: str, *, user_id: str, agent_id: str | None = None, wait: bool = False
    ) -> Job | AddResult:
        job = await self._send(Calls.retry(session_id, user_id, agent_id))
        return await self.wait(job) if wait else job

    async def process_pending(
        self, user_id: str | None = None, *, wait: bool = False
    ) -> list[str] | list[AddResult]:
        jobs = await self._send(Calls.process_pending(user_id))
        return [await self.wait(j) for j in jobs] if wait else jobs

    async def replay(
        self, user_id: str, agent_id: str | None = None, *, wait: bool = False
    ) -> list[str] | list[AddResult]:
        jobs = await self._send(Calls.replay(user_id, agent_id))
        return [await self.wait(j) for j in jobs] if wait else jobs

    async def delete(self, memory_id: str, *, actor: str = "api") -> bool:
        return await self._send(Calls.delete(memory_id, actor))

    async def edit(self, memory_id: str, content: str, *, actor: str = PERSON) -> MemoryItem | None:
        return await self._send(Calls.edit(memory_id, content, actor))

    async def reset(self, user_id: str, agent_id: str | None = None) -> int:
        return await self._send(Calls.reset(user_id, agent_id))

    # --- read path ----------------------------------------------------------------------
    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        return await self._send(Calls.search(query, user_id, limit, agent_id, filters, tiers))

    async def answer(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 20,
        asked_at: str | datetime | None = None,
        tiers: Tiers = "all",
    ) -> Answer:
        return await self._send(Calls.answer(question, user_id, agent_id, limit, asked_at, tiers))

    async def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        return await self._send(Calls.get_all(user_id, agent_id, filters, limit))

    async def get(self, memory_id: str) -> MemoryItem | None:
        return await self._send(Calls.get(memory_id))

    async def history(self, memory_id: str) -> list[HistoryEntry]:
        return await self._send(Calls.history(memory_id))

    async def session_memories(
        self, session_id: str, user_id: str | None = None
    ) -> list[MemoryItem]:
        return await self._send(Calls.session_memories(session_id, user_id))

    async def session_operations(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        return await self._send(Calls.session_operations(session_id, user_id, agent_id))

    async def timeline(self, memory_id: str) -> list[Version]:
        return await self._send(Calls.timeline(memory_id))

    async def session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        return await self._send(Calls.session(session_id, user_id, agent_id))

    async def sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        return await self._send(Calls.sessions(user_id, status))

    async def session_calls(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        return await self._send(Calls.session_calls(session_id, user_id, agent_id))

    async def users(self, prefix: str = "") -> list[str]:
        return await self._send(Calls.users(prefix))

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
