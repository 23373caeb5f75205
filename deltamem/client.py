"""`Client`: the REST API (``deltamem serve``) with the methods of `Memory`.

    client = Client("http://127.0.0.1:8000", api_key="...")
    client.add(messages, user_id="martin", session_id="s1", wait=True)
    client.search("Which films does Martin like?", user_id="martin")

Same names, arguments and return types as `Memory`, with two differences that come
from the service: writes are queued, so `add` (and `retry`, `replay`,
`process_pending`) return the `Job` unless `wait=True`, which polls it to the end and
returns what `Memory` returns; and the store's user ids are the caller's, scoped to
the API key's tenant. Errors are the library's where one fits (`InvalidSession`,
`SessionConflict`, `SessionFailed`, `LLMError`), else `ServiceError`.

Every request is described once, here, as a `Call` (method, path, body, how to read
the answer); `Client` sends them with `httpx.Client` and `deltamem.aio.AsyncClient`
with `httpx.AsyncClient`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote

import httpx
from pydantic_core import to_jsonable_python

from deltamem.answer import Answer
from deltamem.llm.base import CallRecord, LLMError
from deltamem.memory import InvalidSession, SessionFailed
from deltamem.provenance import PERSON, InvalidEdit
from deltamem.retrieval.hybrid import Tiers
from deltamem.server.schemas import CallOut
from deltamem.server.schemas import JobOut as Job
from deltamem.server.scope import job_id
from deltamem.store.base import SessionConflict
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

__all__ = ["Client", "Job", "NotFound", "ServiceError", "Unauthorized"]

T = TypeVar("T")
FINISHED = ("applied", "failed", "deferred")  # job states polling stops at


class ServiceError(RuntimeError):
    """An error answer of the service (a problem details body)."""

    def __init__(self, status: int, title: str, detail: str) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status, self.title, self.detail = status, title, detail


class Unauthorized(ServiceError):
    """401: the API key is missing or not valid."""


class NotFound(ServiceError, KeyError):
    """404 where `Memory` raises KeyError (e.g. `retry` of an unknown session)."""


class InvalidRequest(ServiceError, ValueError):
    """A request the service refused as malformed (400, 413, 415, 422)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its answer becomes a return value."""

    method: str
    path: str
    read: Callable[[Any], T]  # the JSON body (None for 204) -> the return value
    params: dict[str, Any] | None = None
    body: Any = None
    if_missing: Callable[[], T] | None = None  # the value of a 404, if it has one
    invalid: Callable[[str], Exception] = field(default=lambda d: InvalidRequest(422, "", d))

    def result(self, r: httpx.Response) -> T:
        if r.is_success:
            return self.read(r.json() if r.content else None)
        if r.status_code == 404 and self.if_missing is not None:
            return self.if_missing()
        raise self.error(r)

    def error(self, r: httpx.Response) -> Exception:
        try:
            problem = r.json()
            title, detail = str(problem.get("title", "")), str(problem.get("detail", r.text))
        except ValueError:
            title, detail = r.reason_phrase, r.text
        status = r.status_code
        if status == 401:
            return Unauthorized(status, title, detail)
        if status == 422:
            return self.invalid(detail)
        if status in (400, 413, 415):
            return InvalidRequest(status, title, detail)
        if status == 409 and title == "Session conflict":
            return SessionConflict(detail)
        if status == 503:
            return LLMError(detail)
        if status == 404:
            return NotFound(status, title, detail)
        return ServiceError(status, title, detail)


def _q(value: str) -> str:
    return quote(value, safe="")


def _plain(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in to_jsonable_python(params).items() if v is not None}


def _filters(filters: SearchFilters | dict[str, Any] | None) -> dict[str, Any] | None:
    if filters is None:
        return None
    f = filters if isinstance(filters, SearchFilters) else SearchFilters.model_validate(filters)
    return _plain(f.model_dump()) or None


def _jobs(body: Any) -> list[str]:
    return list(body["jobs"])


class Calls:
    """The requests of each `Memory` method (the clients send them)."""

    @staticmethod
    def add(
        messages: Sequence[dict[str, Any] | Message],
        user_id: str,
        session_id: str | None,
        timestamp: str | datetime | None,
        agent_id: str | None,
        infer: bool,
    ) -> Call[Job]:
        msgs = [
            m.model_dump(mode="json", exclude_none=True) if isinstance(m, Message) else m
            for m in messages
        ]
        body = _plain(
            {
                "user_id": user_id,
                "session_id": session_id,
                "timestamp": timestamp,
                "agent_id": agent_id,
                "infer": infer,
            }
        )
        body["messages"] = to_jsonable_python(msgs)
        return Call("POST", "/v1/sessions", Job.model_validate, body=body, invalid=InvalidSession)

    @staticmethod
    def job(job: str) -> Call[Job]:
        return Call("GET", f"/v1/jobs/{_q(job)}", Job.model_validate)

    @staticmethod
    def retry(session_id: str, user_id: str, agent_id: str | None) -> Call[Job]:
        def missing() -> Job:
            raise NotFound(404, "Not Found", f"no session {session_id!r} for user {user_id!r}")

        path = f"/v1/jobs/{_q(job_id(user_id, session_id, agent_id))}/retry"
        return Call("POST", path, Job.model_validate, if_missing=missing)

    @staticmethod
    def process_pending(user_id: str | None) -> Call[list[str]]:
        body = {"user_id": user_id} if user_id is not None else {}
        return Call("POST", "/v1/sessions/process", _jobs, body=body, if_missing=list)

    @staticmethod
    def replay(user_id: str, agent_id: str | None) -> Call[list[str]]:
        body = {"agent_id": agent_id} if agent_id is not None else None
        return Call("POST", f"/v1/users/{_q(user_id)}/replay", _jobs, body=body)

    @staticmethod
    def search(
        query: str,
        user_id: str,
        limit: int,
        agent_id: str | None,
        filters: SearchFilters | dict[str, Any] | None,
        tiers: Tiers,
    ) -> Call[list[SearchHit]]:
        body = _plain({"query": query, "user_id": user_id, "limit": limit, "agent_id": agent_id})
        body.update(tiers=tiers, **({"filters": f} if (f := _filters(filters)) else {}))
        return Call(
            "POST",
            "/v1/search",
            lambda b: [SearchHit.model_validate(h) for h in b["results"]],
            body=body,
        )

    @staticmethod
    def answer(
        question: str,
        user_id: str,
        agent_id: str | None,
        limit: int,
        asked_at: str | datetime | None,
        tiers: Tiers,
    ) -> Call[Answer]:
        body = _plain(
            {
                "question": question,
                "user_id": user_id,
                "agent_id": agent_id,
                "limit": limit,
                "asked_at": asked_at,
                "tiers": tiers,
            }
        )
        return Call(
            "POST",
            "/v1/answer",
            lambda b: Answer(text=b["answer"], memories=b["memories"]),
            body=body,
        )

    @staticmethod
    def get_all(
        user_id: str,
        agent_id: str | None,
        filters: SearchFilters | dict[str, Any] | None,
        limit: int | None,
    ) -> Call[list[MemoryItem]]:
        params = _plain({"user_id": user_id, "agent_id": agent_id, "limit": limit})
        params.update(_filters(filters) or {})
        return Call(
            "GET",
            "/v1/memories",
            lambda b: [MemoryItem.model_validate(m) for m in b["memories"]],
            params=params,
        )

    @staticmethod
    def get(memory_id: str) -> Call[MemoryItem | None]:
        path = f"/v1/memories/{_q(memory_id)}"
        return Call("GET", path, MemoryItem.model_validate, if_missing=lambda: None)

    @staticmethod
    def history(memory_id: str) -> Call[list[HistoryEntry]]:
        def read(b: Any) -> list[HistoryEntry]:
            return [HistoryEntry(memory_id=memory_id, **row) for row in b["history"]]

        return Call("GET", f"/v1/memories/{_q(memory_id)}/history", read, if_missing=list)

    @staticmethod
    def delete(memory_id: str, actor: str) -> Call[bool]:
        path = f"/v1/memories/{_q(memory_id)}"
        params = {"actor": actor}
        return Call("DELETE", path, lambda _: True, params=params, if_missing=lambda: False)

    @staticmethod
    def timeline(memory_id: str) -> Call[list[Version]]:
        def read(b: Any) -> list[Version]:
            return [Version(memory_id=memory_id, **row) for row in b["timeline"]]

        return Call("GET", f"/v1/memories/{_q(memory_id)}/timeline", read, if_missing=list)

    @staticmethod
    def edit(memory_id: str, content: str, actor: str) -> Call[MemoryItem | None]:
        return Call(
            "PATCH",
            f"/v1/memories/{_q(memory_id)}",
            MemoryItem.model_validate,
            body={"content": content, "actor": actor},
            if_missing=lambda: None,
            invalid=InvalidEdit,
        )

    @staticmethod
    def session(session_id: str, user_id: str, agent_id: str | None) -> Call[SessionRecord | None]:
        return Call(
            "GET",
            f"/v1/sessions/{_q(session_id)}",
            SessionRecord.model_validate,
            params=_plain({"user_id": user_id, "agent_id": agent_id}),
            if_missing=lambda: None,
        )

    @staticmethod
    def sessions(user_id: str | None, status: SessionStatus | None) -> Call[list[SessionRecord]]:
        return Call(
            "GET",
            "/v1/sessions",
            lambda b: [SessionRecord.model_validate(r) for r in b["sessions"]],
            params=_plain({"user_id": user_id, "status": status}),
            if_missing=list,
        )

    @staticmethod
    def session_calls(
        session_id: str, user_id: str, agent_id: str | None
    ) -> Call[list[CallRecord]]:
        def read(b: Any) -> list[CallRecord]:
            return [CallRecord(**CallOut.model_validate(c).model_dump()) for c in b["calls"]]

        return Call(
            "GET",
            f"/v1/sessions/{_q(session_id)}/calls",
            read,
            params=_plain({"user_id": user_id, "agent_id": agent_id}),
            if_missing=list,
        )

    @staticmethod
    def users(prefix: str) -> Call[list[str]]:
        params = {"prefix": prefix} if prefix else None
        return Call("GET", "/v1/users", lambda b: list(b["users"]), params=params)

    @staticmethod
    def reset(user_id: str, agent_id: str | None) -> Call[int]:
        params = _plain({"agent_id": agent_id})
        path = f"/v1/users/{_q(user_id)}"
        return Call(
            "DELETE", path, lambda b: int(b["removed_memories"]), params=params, if_missing=int
        )

    @staticmethod
    def session_memories(session_id: str, user_id: str | None) -> Call[list[MemoryItem]]:
        if user_id is None:
            raise TypeError("session_memories over the API needs the user_id")
        return Call(
            "GET",
            f"/v1/sessions/{_q(session_id)}/memories",
            lambda b: [MemoryItem.model_validate(m) for m in b["memories"]],
            params={"user_id": user_id},
        )

    @staticmethod
    def session_operations(
        session_id: str, user_id: str, agent_id: str | None
    ) -> Call[list[Operation]]:
        def read(b: Any) -> list[Operation]:
            return list(Job.model_validate(b).operations or [])

        path = f"/v1/jobs/{_q(job_id(user_id, session_id, agent_id))}"
        return Call("GET", path, read, if_missing=list)


def job_result(job: Job, already_applied: bool = False) -> AddResult:
    """What `Memory.add` returns for a finished job (SessionFailed for a failed one)."""
    if job.status == "failed":
        raise SessionFailed(
            f"session {job.session_id!r}: {job.error}. It is kept in the log as failed; "
            "retry it with Client.retry()"
        )
    return AddResult(
        session_id=job.session_id,
        status=job.status,  # type: ignore[arg-type]  # applied or deferred here
        operations=job.operations or [],
        already_applied=already_applied and job.status == "applied",
    )


class Client:
    """The REST API with `Memory`'s methods (blocking; see `deltamem.aio.AsyncClient`)."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 60.0,
        poll_interval: float = 0.2,
        wait_timeout: float = 900.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.poll_interval, self.wait_timeout = poll_interval, wait_timeout
        self._http = http or httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout
        )

    def _send(self, call: Call[T]) -> T:
        r = self._http.request(call.method, call.path, params=call.params, json=call.body)
        return call.result(r)

    # --- jobs ---------------------------------------------------------------------------
    def job(self, job: str) -> Job:
        return self._send(Calls.job(job))

    def wait(self, job: Job | str) -> AddResult:
        """Poll a job until it is applied (or deferred) and return its result."""
        current = job if isinstance(job, Job) else self.job(job)
        first = current.status
        deadline = time.monotonic() + self.wait_timeout
        while current.status not in FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {current.job_id} still {current.status}")
            time.sleep(self.poll_interval)
            current = self.job(current.job_id)
        return job_result(current, already_applied=first == "applied")

    # --- write path ---------------------------------------------------------------------
    @overload
    def add(
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
    def add(
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
    def add(
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
        """Queue a session; the job, or with `wait=True` what `Memory.add` returns."""
        job = self._send(Calls.add(messages, user_id, session_id, timestamp, agent_id, infer))
        return self.wait(job) if wait else job

    def retry(
        self, session_id: str, *, user_id: str, agent_id: str | None = None, wait: bool = False
    ) -> Job | AddResult:
        """Queue a failed or deferred session again (KeyError-like NotFound if unknown)."""
        job = self._send(Calls.retry(session_id, user_id, agent_id))
        return self.wait(job) if wait else job

    def process_pending(
        self, user_id: str | None = None, *, wait: bool = False
    ) -> list[str] | list[AddResult]:
        """Queue the deferred (infer=False) sessions of a user, or of every user of the
        tenant; the job ids waiting, or with `wait=True` their results."""
        jobs = self._send(Calls.process_pending(user_id))
        return [self.wait(j) for j in jobs] if wait else jobs

    def replay(
        self, user_id: str, agent_id: str | None = None, *, wait: bool = False
    ) -> list[str] | list[AddResult]:
        jobs = self._send(Calls.replay(user_id, agent_id))
        return [self.wait(j) for j in jobs] if wait else jobs

    def delete(self, memory_id: str, *, actor: str = "api") -> bool:
        """Delete a memory (kept in its history, with `actor`: "api" or "person")."""
        return self._send(Calls.delete(memory_id, actor))

    def edit(self, memory_id: str, content: str, *, actor: str = PERSON) -> MemoryItem | None:
        """Correct a memory by hand: a new version, recorded as an update by `actor`
        ("person" or "api"). None if there is no such memory; InvalidEdit for
        unusable text."""
        return self._send(Calls.edit(memory_id, content, actor))

    def reset(self, user_id: str, agent_id: str | None = None) -> int:
        return self._send(Calls.reset(user_id, agent_id))

    # --- read path ----------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        return self._send(Calls.search(query, user_id, limit, agent_id, filters, tiers))

    def answer(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 20,
        asked_at: str | datetime | None = None,
        tiers: Tiers = "all",
    ) -> Answer:
        return self._send(Calls.answer(question, user_id, agent_id, limit, asked_at, tiers))

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        return self._send(Calls.get_all(user_id, agent_id, filters, limit))

    def get(self, memory_id: str) -> MemoryItem | None:
        return self._send(Calls.get(memory_id))

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self._send(Calls.history(memory_id))

    def session_memories(self, session_id: str, user_id: str | None = None) -> list[MemoryItem]:
        return self._send(Calls.session_memories(session_id, user_id))

    def session_operations(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        return self._send(Calls.session_operations(session_id, user_id, agent_id))

    def timeline(self, memory_id: str) -> list[Version]:
        """Every version of a memory, oldest first, with the session and turns behind
        each; empty for an unknown id (or another tenant's)."""
        return self._send(Calls.timeline(memory_id))

    def session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        """A logged session: its messages, status, error and tries (`seq` is 0: the
        service does not show the store's arrival counter)."""
        return self._send(Calls.session(session_id, user_id, agent_id))

    def sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        """The session log in arrival order: one user's, or every user's of the tenant."""
        return self._send(Calls.sessions(user_id, status))

    def session_calls(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        """The LLM calls made for a session, every try of it, with their raw replies."""
        return self._send(Calls.session_calls(session_id, user_id, agent_id))

    def users(self, prefix: str = "") -> list[str]:
        """The ids of the tenant's users (those starting with `prefix`)."""
        return self._send(Calls.users(prefix))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
