"""The REST routes of the memory inspector's reads and hand edits, the service side
of `Memory.timeline`, `edit`, `session`, `sessions`, `session_calls` and `users`.

Scoped like every route: user ids are built from the caller's tenant, a memory
found by its id is checked to be the tenant's, and whatever is another tenant's
is answered 404 (never 403), with nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import FastAPI, Query

from deltamem.memory import Memory
from deltamem.provenance import InvalidEdit
from deltamem.server import scope
from deltamem.server.params import (
    AgentQuery,
    MemoryPath,
    OptUserQuery,
    SessionPath,
    Tenant,
    UserFilter,
    UserQuery,
    check_history_owner,
    internal,
    owned,
)
from deltamem.server.problems import ApiError
from deltamem.server.schemas import (
    CallList,
    CallOut,
    EditIn,
    MemoryOut,
    SessionList,
    SessionOut,
    TimelineOut,
    UserList,
    VersionOut,
)
from deltamem.types import MemoryItem, SessionRecord, SessionStatus

T = TypeVar("T")


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def add_inspect_routes(app: FastAPI, memory: Memory) -> None:
    """Add the routes to `app` (made by `deltamem.server.app.create_app`)."""

    @app.get("/v1/memories/{memory_id}/timeline", response_model=TimelineOut, tags=["memories"])
    async def memory_timeline(
        memory_id: MemoryPath, tenant: Tenant, user_id: OptUserQuery = None
    ) -> TimelineOut:
        """Every version of a memory (add, updates, delete), oldest first, each with the
        session, agent and turns it came from; an edit by a person has none."""

        def timeline() -> TimelineOut:
            versions = memory.timeline(memory_id)
            check_history_owner(memory, versions, tenant, user_id, memory_id)
            return TimelineOut(memory_id=memory_id, timeline=[VersionOut.of(v) for v in versions])

        return await _run(timeline)

    @app.patch("/v1/memories/{memory_id}", response_model=MemoryOut, tags=["memories"])
    async def edit_memory(
        memory_id: MemoryPath, body: EditIn, tenant: Tenant, user_id: OptUserQuery = None
    ) -> MemoryOut:
        """Correct a memory by hand: a new version with `content`, recorded in its
        history as an update by `actor` ("person": edited by a person), never a silent
        overwrite. The same text again records nothing. `expires_at` sets when it
        stops being served (null: never), without a new version."""

        def edit() -> MemoryItem | None:
            edited: MemoryItem | None = owned(memory.get(memory_id), tenant, user_id, memory_id)
            try:
                if body.content is not None:
                    edited = memory.edit(memory_id, body.content, actor=body.actor)
                if edited is not None and "expires_at" in body.model_fields_set:
                    edited = memory.set_expiry(memory_id, body.expires_at)
            except InvalidEdit as exc:
                raise ApiError(422, str(exc), "Invalid edit") from exc
            except ValueError as exc:  # an unreadable expires_at
                raise ApiError(422, f"expires_at: {exc}", "Invalid edit") from exc
            return edited

        edited = await _run(edit)
        if edited is None:  # deleted in the meantime
            raise ApiError(404, f"no memory {memory_id!r}")
        return MemoryOut.of(edited)

    @app.get("/v1/sessions", response_model=SessionList, tags=["sessions"])
    async def list_sessions(
        tenant: Tenant,
        user_id: UserFilter = None,
        status: SessionStatus | None = None,
    ) -> SessionList:
        """The session log in arrival order: one user's, or every user's of the
        tenant; optionally of one status. 404 for a user with nothing stored."""

        def sessions() -> list[SessionRecord]:
            if user_id is None:
                return [
                    r for r in memory.sessions(None, status) if scope.owned_by(r.user_id, tenant)
                ]
            uid = internal(tenant, user_id)
            rows = memory.sessions(uid)
            if not rows and not memory.store.count(uid):
                raise ApiError(404, f"no user {user_id!r}")
            return [r for r in rows if status is None or r.status == status]

        rows = await _run(sessions)
        return SessionList(
            user_id=user_id, count=len(rows), sessions=[SessionOut.of(r) for r in rows]
        )

    async def _session(
        tenant: str, session_id: str, user_id: str, agent_id: str | None
    ) -> SessionRecord:
        uid = internal(tenant, user_id)
        rec = await _run(memory.session, session_id, user_id=uid, agent_id=agent_id)
        if rec is None:
            raise ApiError(404, f"no session {session_id!r} for user {user_id!r}")
        return rec

    @app.get("/v1/sessions/{session_id}", response_model=SessionOut, tags=["sessions"])
    async def get_session(
        session_id: SessionPath, user_id: UserQuery, tenant: Tenant, agent_id: AgentQuery = None
    ) -> SessionOut:
        """A logged session: its messages, status (pending, applied, failed, deferred),
        error and tries."""
        return SessionOut.of(await _session(tenant, session_id, user_id, agent_id))

    @app.get("/v1/sessions/{session_id}/calls", response_model=CallList, tags=["sessions"])
    async def session_calls(
        session_id: SessionPath, user_id: UserQuery, tenant: Tenant, agent_id: AgentQuery = None
    ) -> CallList:
        """The LLM calls made for a session, every try of it, oldest first: purpose,
        tokens, KV-cache hits, seconds and the model's raw reply."""
        rec = await _session(tenant, session_id, user_id, agent_id)
        calls = await _run(
            memory.session_calls, session_id, user_id=rec.user_id, agent_id=rec.agent_id
        )
        return CallList(
            session_id=session_id,
            user_id=user_id,
            agent_id=agent_id,
            calls=[CallOut.of(c) for c in calls],
        )

    @app.get("/v1/users", response_model=UserList, tags=["sessions"])
    async def list_users(
        tenant: Tenant,
        prefix: Annotated[
            str, Query(max_length=scope.MAX_ID_CHARS, description="ids that start with it")
        ] = "",
    ) -> UserList:
        """The ids of the tenant's users (with a logged session or a memory), sorted."""
        rows = await _run(memory.users, internal_prefix(tenant, prefix))
        users = [scope.external_user(u)[1] for u in rows]
        return UserList(count=len(users), users=users)


def internal_prefix(tenant: str, prefix: str) -> str:
    """The store's prefix of a tenant's user ids that start with `prefix` (the tenant
    part is fixed: no prefix reaches another tenant's users)."""
    return f"{scope.check_tenant(tenant)}:{prefix}"
