"""The REST API over one `Memory`, scoped by tenant (from the API key) and user.

    app = create_app(Memory(path), {"key-of-acme": "acme"})

Writes are queued: ``POST /v1/sessions`` logs the session durably and answers 202
with a job id; the `Worker` does the rest (embedding the session's turns as
episodes, then the LLM work), so the answer comes at once whatever the session's
size. ``DELETE /v1/jobs/{id}`` cancels a job that is not applied. Every `Memory`
call runs in a worker thread, so the event loop never waits on the LLM, the
embedder or the database.
The OpenAPI spec is at ``/openapi.json`` (docs at ``/docs``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import FastAPI, Query, Request, Response
from pydantic import ValidationError

import deltamem
from deltamem.embed.base import EmbedderError
from deltamem.memory import Memory
from deltamem.server import scope
from deltamem.server.config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_IMPORT_BYTES,
    WorkerSettings,
    validate_keys,
)
from deltamem.server.lease import LeaseBusy
from deltamem.server.metrics import ServiceMetrics
from deltamem.server.params import (
    AgentQuery,
    MemoryPath,
    OptUserQuery,
    SessionPath,
    SessionQuery,
    Tenant,
    UserPath,
    UserQuery,
    check_history_owner,
    owned,
)
from deltamem.server.params import internal as _internal
from deltamem.server.problems import ApiError, ApiKeyAuth, BodyLimit, install_handlers
from deltamem.server.routes_inspect import add_inspect_routes
from deltamem.server.routes_users import add_user_routes
from deltamem.server.schemas import (
    Actor,
    AnswerIn,
    AnswerOut,
    Health,
    HistoryOut,
    HitOut,
    JobOut,
    MemoryList,
    MemoryOut,
    ProcessIn,
    ProcessOut,
    ReplayIn,
    ReplayOut,
    ResetOut,
    SearchIn,
    SearchOut,
    SessionIn,
    SessionMemories,
    problem_responses,
)
from deltamem.server.worker import Worker
from deltamem.timeparse import parse_time
from deltamem.types import MemoryType, SearchFilters, SessionRecord

T = TypeVar("T")


# a session up to this many characters is embedded in its submit request (tens of
# milliseconds, and its turns are searchable at once, as `Memory.add` makes them); a
# bigger one is left to the worker, so that its 202 does not wait (a 3 MB session
# took 11 s when every session was embedded in the request)
INDEX_INLINE_CHARS = 20_000


def create_app(
    memory: Memory,
    keys: Mapping[str, str],
    *,
    worker: Worker | None = None,
    worker_settings: WorkerSettings | None = None,
    start_worker: bool = True,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_import_bytes: int = DEFAULT_MAX_IMPORT_BYTES,
    llm_concurrency: int = 4,
    ui: bool = True,
    ui_local: bool = False,
) -> FastAPI:
    """The REST API. `keys` maps API keys to tenants. The worker (made here unless
    given) starts and stops with the app's lifespan when `start_worker`. With `ui`,
    the memory inspector is served at /ui (same keys and scoping); `ui_local` lets
    loopback clients in without a key, seeing the whole store (`deltamem ui`)."""
    keys = validate_keys(keys)
    worker = worker or Worker(memory, worker_settings)
    limits: dict[str, anyio.CapacityLimiter] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        limits["llm"] = anyio.CapacityLimiter(llm_concurrency)
        if start_worker:
            worker.start()
        try:
            yield
        finally:
            if start_worker:
                await anyio.to_thread.run_sync(worker.stop)

    app = FastAPI(
        title="deltamem",
        version=deltamem.__version__,
        description=(
            "Long-term memory for LLM agents. Authenticate with an API key "
            "(`Authorization: Bearer KEY` or `X-API-Key: KEY`); everything is scoped to "
            "the key's tenant. Errors are problem details (RFC 9457)."
        ),
        lifespan=lifespan,
        responses=problem_responses(400, 401, 404, 409, 413, 415, 422, 500, 503),
    )
    app.state.memory = memory
    app.state.worker = worker
    install_handlers(app)
    app.add_middleware(
        BodyLimit, max_bytes=max_body_bytes, import_max_bytes=max(max_import_bytes, max_body_bytes)
    )
    app.add_middleware(ApiKeyAuth, keys=keys, prefix="/v1", paths=("/metrics",))
    metrics = ServiceMetrics(memory, worker)
    app.state.metrics = metrics

    async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    async def run_llm(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(
            lambda: fn(*args, **kwargs), limiter=limits.get("llm")
        )

    def filters_of(**given: Any) -> SearchFilters | None:
        given = {k: v for k, v in given.items() if v is not None}
        if not given:
            return None
        try:
            return SearchFilters.model_validate(given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ApiError(422, f"{where}: {first['msg']}", "Invalid filter") from exc

    # --- health --------------------------------------------------------------------
    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> Health:
        return Health(version=deltamem.__version__, worker=worker.describe())

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics(request: Request) -> Response:
        """The service's metrics in Prometheus' text format (deltamem/server/metrics.py),
        for any API key."""
        body, media_type = await run(metrics.exposition, request.headers.get("accept"))
        return Response(body, media_type=media_type)

    # --- sessions and jobs -------------------------------------------------------------
    @app.post("/v1/sessions", status_code=202, response_model=JobOut, tags=["sessions"])
    async def submit_session(body: SessionIn, tenant: Tenant) -> JobOut:
        """Log a dialogue session durably and queue it; 202 with the job to poll. The
        session is in the log before the answer. A small session's turns are embedded
        (searchable as episodes) in the same request, as the library does, which
        costs milliseconds; a bigger one's by the worker, so the answer does not wait
        for them (INDEX_INLINE_CHARS)."""
        size = sum(len(m.content) for m in body.messages)

        def log(index: bool) -> SessionRecord:
            return memory.log_session(
                [m.model_dump(exclude_none=True) for m in body.messages],
                user_id=_internal(tenant, body.user_id),
                session_id=body.session_id,
                timestamp=body.timestamp,
                agent_id=body.agent_id,
                infer=body.infer,
                expires_at=body.expires_at,
                index=index,
            )

        try:
            rec = await run(log, size <= INDEX_INLINE_CHARS)
        except EmbedderError:
            # the embedder refused or failed: the session is logged all the same, and
            # the worker indexes it (or reports it) later
            rec = await run(log, False)
        worker.wake()  # a deferred session (infer=false) is indexed by the worker too
        view = await run(worker.job, (rec.user_id, rec.session_id, rec.agent_id))
        assert view is not None  # logged just now; the log does not lose sessions
        return view

    async def _job_record(tenant: str, job_id: str) -> SessionRecord:
        try:
            user, session, agent = scope.parse_job_id(job_id)
        except scope.ScopeError as exc:
            raise ApiError(404, f"no job {job_id!r}") from exc
        rec = await run(memory.store.get_session, _internal(tenant, user), session, agent)
        if rec is None:
            raise ApiError(404, f"no job {job_id!r}")
        return rec

    async def _job_view(rec: SessionRecord, job_id: str) -> JobOut:
        view = await run(worker.job, (rec.user_id, rec.session_id, rec.agent_id))
        if view is None:  # removed from the log in the meantime (user reset)
            raise ApiError(404, f"no job {job_id!r}")
        return view

    @app.get("/v1/jobs/{job_id}", response_model=JobOut, tags=["sessions"])
    async def get_job(job_id: str, tenant: Tenant) -> JobOut:
        """A job's status, read back from the session log."""
        rec = await _job_record(tenant, job_id)
        return await _job_view(rec, job_id)

    @app.delete("/v1/jobs/{job_id}", response_model=JobOut, tags=["sessions"])
    async def cancel_job(job_id: str, tenant: Tenant) -> JobOut:
        """Cancel a job that is not applied (pending, running, deferred or failed): its
        session is withdrawn from the log with its episodes, so no memory comes of it;
        a running job is not waited for, its worker drops the result. The answer is
        the job as it was, with status "cancelled"; the job is gone after it (404).
        409 for an applied job (delete its memories instead)."""
        rec = await _job_record(tenant, job_id)
        view = await _job_view(rec, job_id)
        was = await run(worker.cancel, (rec.user_id, rec.session_id, rec.agent_id))
        if was is None:  # cancelled by someone else meanwhile
            raise ApiError(404, f"no job {job_id!r}")
        if was == "applied":
            raise ApiError(
                409,
                f"job {job_id!r} is applied: it cannot be cancelled; delete its memories "
                "(GET /v1/sessions/{id}/memories lists them)",
                "Job applied",
            )
        return view.model_copy(update={"status": "cancelled"})

    @app.post("/v1/jobs/{job_id}/retry", status_code=202, response_model=JobOut, tags=["sessions"])
    async def retry_job(job_id: str, tenant: Tenant) -> JobOut:
        """Queue a failed (parked) or deferred (sent with infer=false) job. Retrying a
        pending or applied job changes nothing: a session is never applied twice."""
        rec = await _job_record(tenant, job_id)
        if rec.status in ("failed", "deferred"):
            await run(worker.request_retry, (rec.user_id, rec.session_id, rec.agent_id))
        return await _job_view(rec, job_id)

    @app.post(
        "/v1/users/{user_id}/replay", status_code=202, response_model=ReplayOut, tags=["sessions"]
    )
    async def replay_user(
        user_id: UserPath, tenant: Tenant, body: ReplayIn | None = None
    ) -> ReplayOut:
        """Rebuild a user's memory from the session log: their memories are removed and
        every logged session is queued again, in log order."""
        internal = _internal(tenant, user_id)
        agent = body.agent_id if body else None

        def reset() -> tuple[int, list[SessionRecord]]:
            with worker.exclusive(internal):
                removed = memory.store.reset(internal, agent, keep_log=True)
                return removed, memory.store.list_sessions(internal, status="pending")

        try:
            removed, queued = await run(reset)
        except LeaseBusy as exc:
            raise ApiError(409, scope.for_caller(str(exc), internal), "User busy") from exc
        worker.wake()
        return ReplayOut(
            user_id=user_id,
            agent_id=agent,
            removed_memories=removed,
            jobs=[
                scope.job_id(user_id, r.session_id, r.agent_id)
                for r in queued
                if agent is None or r.agent_id == agent
            ],
        )

    @app.post("/v1/sessions/process", status_code=202, response_model=ProcessOut, tags=["sessions"])
    async def process_sessions(tenant: Tenant, body: ProcessIn | None = None) -> ProcessOut:
        """Queue the sessions sent with infer=false (deferred) of one user, or of every
        user of the tenant; the answer lists every job waiting for the worker, in log
        order (those already pending included). 404 for a user with no sessions."""
        user = body.user_id if body else None

        def queue() -> list[SessionRecord]:
            internal = _internal(tenant, user) if user is not None else None
            rows = [
                r
                for r in memory.store.list_sessions(internal)
                if internal is not None or scope.owned_by(r.user_id, tenant)
            ]
            if internal is not None and not rows:
                raise ApiError(404, f"no user {user!r}")
            for r in rows:
                if r.status == "deferred":
                    memory.store.requeue_session(r.user_id, r.session_id, r.agent_id)
            return [r for r in rows if r.status in ("pending", "deferred")]

        queued = await run(queue)
        worker.wake()
        return ProcessOut(
            user_id=user,
            jobs=[
                scope.job_id(scope.external_user(r.user_id)[1], r.session_id, r.agent_id)
                for r in queued
            ],
        )

    @app.delete("/v1/users/{user_id}", response_model=ResetOut, tags=["sessions"])
    async def reset_user(
        user_id: UserPath, tenant: Tenant, agent_id: AgentQuery = None
    ) -> ResetOut:
        """Forget a user entirely: everything the store holds of them, from every table
        (session log and so the job queue, memories, history, episodes, keyword index,
        model call log, leases, cached banks); the answer counts what was removed by
        kind. With agent_id, only the memories, history and session log kept for that
        agent. 404 for a user with nothing stored. The user's jobs that were not
        applied are cancelled (`cancelled_jobs`), not waited for: one a worker is
        running has its result dropped."""
        internal = _internal(tenant, user_id)

        def reset() -> tuple[dict[str, int], list[SessionRecord]]:
            try:
                with worker.claimed(internal):
                    sessions = memory.store.list_sessions(internal)
                    if not sessions and not memory.store.count(internal):
                        raise ApiError(404, f"no user {user_id!r}")
                    open_jobs = [
                        r
                        for r in sessions
                        if r.status != "applied" and agent_id in (None, r.agent_id)
                    ]
                    if agent_id is not None:
                        return {"memories": memory.reset(internal, agent_id)}, open_jobs
                    return memory.forget(internal), open_jobs
            finally:
                if agent_id is None:
                    worker.forget_user(internal)

        removed, cancelled = await run(reset)
        return ResetOut(
            user_id=user_id,
            agent_id=agent_id,
            removed_memories=removed["memories"],
            removed=removed,
            cancelled_jobs=[scope.job_id(user_id, r.session_id, r.agent_id) for r in cancelled],
        )

    @app.get(
        "/v1/sessions/{session_id}/memories", response_model=SessionMemories, tags=["memories"]
    )
    async def session_memories(
        session_id: SessionPath, user_id: UserQuery, tenant: Tenant
    ) -> SessionMemories:
        """The memories a session added or updated, as that session wrote them."""
        mems = await run(memory.session_memories, session_id, _internal(tenant, user_id))
        return SessionMemories(
            session_id=session_id, user_id=user_id, memories=[MemoryOut.of(m) for m in mems]
        )

    # --- memories ------------------------------------------------------------------------
    @app.get("/v1/memories", response_model=MemoryList, tags=["memories"])
    async def list_memories(
        tenant: Tenant,
        user_id: UserQuery,
        agent_id: AgentQuery = None,
        memory_type: MemoryType | None = None,
        since: Annotated[str | None, Query(max_length=64)] = None,
        until: Annotated[str | None, Query(max_length=64)] = None,
        session_id: SessionQuery = None,
        limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    ) -> MemoryList:
        """A user's live memories, oldest event first, optionally filtered."""
        filters = filters_of(
            since=since, until=until, memory_type=memory_type, session_id=session_id
        )
        mems = await run(
            memory.get_all,
            user_id=_internal(tenant, user_id),
            agent_id=agent_id,
            filters=filters,
            limit=limit,
        )
        return MemoryList(
            user_id=user_id, count=len(mems), memories=[MemoryOut.of(m) for m in mems]
        )

    @app.get("/v1/memories/{memory_id}", response_model=MemoryOut, tags=["memories"])
    async def get_memory(
        memory_id: MemoryPath, tenant: Tenant, user_id: OptUserQuery = None
    ) -> MemoryOut:
        mem = owned(await run(memory.get, memory_id), tenant, user_id, memory_id)
        return MemoryOut.of(mem)

    @app.delete("/v1/memories/{memory_id}", status_code=204, tags=["memories"])
    async def delete_memory(
        memory_id: MemoryPath,
        tenant: Tenant,
        user_id: OptUserQuery = None,
        actor: Annotated[
            Actor, Query(description="who deletes it, as its history will say")
        ] = "api",
    ) -> Response:
        """Delete a memory (the deletion is kept in its history, with `actor`: "api"
        for the application, "person" for a delete made by hand)."""

        def delete() -> bool:
            owned(memory.get(memory_id), tenant, user_id, memory_id)
            return memory.delete(memory_id, actor=actor)

        if not await run(delete):
            raise ApiError(404, f"no memory {memory_id!r}")
        return Response(status_code=204)

    @app.get("/v1/memories/{memory_id}/history", response_model=HistoryOut, tags=["memories"])
    async def memory_history(
        memory_id: MemoryPath, tenant: Tenant, user_id: OptUserQuery = None
    ) -> HistoryOut:
        """Every change of a memory (add, updates, deletion), oldest first."""

        def history() -> HistoryOut:
            entries = memory.history(memory_id)
            check_history_owner(memory, entries, tenant, user_id, memory_id)
            return HistoryOut.of(memory_id, entries)

        return await run(history)

    # --- read path -------------------------------------------------------------------------
    @app.post("/v1/search", response_model=SearchOut, tags=["read"])
    async def search(body: SearchIn, tenant: Tenant) -> SearchOut:
        """Hybrid (dense + keyword) search over one user's memories."""
        f = body.filters
        filters = filters_of(**f.model_dump()) if f else None
        with metrics.timed_search(body.tiers):
            hits = await run(
                memory.search,
                body.query,
                user_id=_internal(tenant, body.user_id),
                limit=body.limit,
                agent_id=body.agent_id,
                filters=filters,
                tiers=body.tiers,
            )
        return SearchOut(query=body.query, results=[HitOut.of(h) for h in hits])

    @app.post("/v1/answer", response_model=AnswerOut, tags=["read"])
    async def answer(body: AnswerIn, tenant: Tenant) -> AnswerOut:
        """Answer a question about the user from their memories (LLM)."""
        if body.asked_at is not None:
            try:
                parse_time(body.asked_at)
            except ValueError as exc:
                raise ApiError(422, f"asked_at: {exc}", "Invalid request") from exc
        await run_llm(worker.ensure_llm)
        ans = await run_llm(
            memory.answer,
            body.question,
            user_id=_internal(tenant, body.user_id),
            agent_id=body.agent_id,
            limit=body.limit,
            asked_at=body.asked_at,
            tiers=body.tiers,
        )
        return AnswerOut(
            question=body.question, answer=ans.text, memories=[HitOut.of(h) for h in ans.memories]
        )

    add_inspect_routes(app, memory)
    add_user_routes(app, memory, worker)

    if ui:
        from deltamem.server.ui import mount_ui

        mount_ui(app, memory, worker, keys, local=ui_local)
    return app
