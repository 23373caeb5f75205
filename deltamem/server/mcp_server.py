"""The MCP server (official `mcp` SDK, v2 `MCPServer`, formerly FastMCP): memory tools
for an agent, over stdio or streamable HTTP.

Tools: ``remember`` (queue a conversation; or wait for it), ``job_status``,
``search`` (compact hits: content, kind, date, id; ``verbose`` for full records),
``answer``, ``list_memories``, ``memory_history``. Everything is scoped
by user id inside a tenant: over stdio the tenant is the server's (``default``
unless told); over HTTP it is the tenant of the request's API key (same keys as
the REST API). No tool deletes: an agent talked into "forgetting everything" has
no way to remove a memory (deletion is the application's call, over REST).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from deltamem.llm.base import LLMError
from deltamem.memory import InvalidSession, Memory, SessionFailed
from deltamem.server import scope
from deltamem.server.config import DEFAULT_TENANT, tenant_for_key
from deltamem.server.problems import supplied_key
from deltamem.server.schemas import HistoryOut, JobOut, MemoryOut
from deltamem.server.worker import Worker
from deltamem.store.base import SessionConflict
from deltamem.types import Operation, SearchHit

log = logging.getLogger("deltamem.mcp")
T = TypeVar("T")

INSTRUCTIONS = (
    "Long-term memory of the people you talk with. Call `remember` with a finished "
    "conversation (it is processed in the background), `search` or `answer` before "
    "replying about a person, `list_memories` to see what is known, `memory_history` "
    "to see how a fact changed. Always pass the same user_id for the same person."
)


class ConversationMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1)
    timestamp: str | None = None
    name: str | None = None


class RememberResult(BaseModel):
    job_id: str
    session_id: str
    status: Literal["pending", "running", "applied", "failed"]
    error: str | None = None
    operations: list[Operation] | None = None


class SearchResult(BaseModel):
    """A hit in full (search with verbose=true): the whole record and its score."""

    memory: MemoryOut
    score: float
    kind: str = "fact"  # "episode": a raw turn of a past conversation
    speaker: str | None = None


class CompactHit(BaseModel):
    """A hit as search gives it by default: what an agent reads, nothing else."""

    content: str  # an episode's is "speaker: words"
    kind: str  # "fact" (of the memory bank) or "episode" (a turn of a past conversation)
    date: str  # when it happened (event time), YYYY-MM-DD
    id: str  # a fact's id is what memory_history takes

    @classmethod
    def of(cls, hit: SearchHit) -> CompactHit:
        m = hit.memory
        content = m.content if hit.kind == "fact" else f"{hit.speaker or '?'}: {m.content}"
        return cls(content=content, kind=hit.kind, date=m.timestamp.date().isoformat(), id=m.id)


class SearchResults(BaseModel):
    results: list[CompactHit | SearchResult]  # best first; SearchResult with verbose=true


class AnswerResult(BaseModel):
    answer: str
    memories: list[MemoryOut]


class MemoryListing(BaseModel):
    user_id: str
    count: int
    memories: list[MemoryOut]


def compact_result(model: BaseModel) -> CallToolResult:
    """A tool's result whose text is JSON on one line, not indented (the SDK indents
    it by two spaces a level: tokens an agent pays for and gains nothing from)."""
    data = model.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _tenant(ctx: Context | None, default: str, keys: Mapping[str, str] | None) -> str:
    """The tenant of the request's API key over HTTP, else the server's tenant."""
    headers = None
    if ctx is not None:
        try:
            headers = ctx.headers
        except ValueError:  # no request (in-process call)
            headers = None
    if headers is None or not keys:
        return default
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    tenant = tenant_for_key(keys, supplied_key({"headers": raw}))
    if tenant is None:  # the HTTP guard lets no such request through; be safe anyway
        raise ToolError("an API key is required")
    return tenant


def create_mcp_server(
    memory: Memory,
    *,
    tenant: str = DEFAULT_TENANT,
    keys: Mapping[str, str] | None = None,
    worker: Worker | None = None,
) -> MCPServer:
    """Memory tools over `memory`. Sessions queue on `worker` (made here if not
    given; whoever runs the server starts it: `serve_mcp` does)."""
    scope.check_tenant(tenant)
    worker = worker or Worker(memory)
    mcp = MCPServer("deltamem", instructions=INSTRUCTIONS, version="0.1.0")
    mcp.worker = worker  # type: ignore[attr-defined]

    async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def user(ctx: Context | None, user_id: str) -> str:
        try:
            return scope.internal_user(_tenant(ctx, tenant, keys), user_id)
        except scope.ScopeError as exc:
            raise ToolError(str(exc)) from exc

    @mcp.tool()
    async def remember(
        messages: Annotated[list[ConversationMessage], Field(min_length=1, max_length=2000)],
        user_id: str,
        session_id: str | None = None,
        timestamp: str | None = None,
        agent_id: str | None = None,
        wait: bool = False,
        ctx: Context | None = None,
    ) -> RememberResult:
        """Remember a conversation with the user: it is logged now and turned into
        memories in the background (wait=true to wait for the result). `timestamp`
        is when the conversation happened (ISO 8601); relative dates in it are
        resolved against it."""
        internal = user(ctx, user_id)

        def log_it() -> Any:
            return memory.log_session(
                [m.model_dump(exclude_none=True) for m in messages],
                user_id=internal,
                session_id=session_id,
                timestamp=timestamp,
                agent_id=agent_id,
                # not waiting: the worker embeds its turns, as for the REST API
                index=wait,
            )

        try:
            rec = await run(log_it)
        except (InvalidSession, SessionConflict) as exc:
            raise ToolError(scope.for_caller(str(exc), internal)) from exc
        job = scope.job_id(user_id, rec.session_id, rec.agent_id)
        if not wait:
            worker.wake()
            return RememberResult(job_id=job, session_id=rec.session_id, status=rec.status)
        try:
            result = await run(worker.process_now, rec)
        except SessionFailed as exc:
            return RememberResult(
                job_id=job, session_id=rec.session_id, status="failed", error=str(exc)
            )
        return RememberResult(
            job_id=job, session_id=rec.session_id, status="applied", operations=result.operations
        )

    @mcp.tool()
    async def job_status(job_id: str, ctx: Context | None = None) -> JobOut:
        """The status of a `remember` job: pending, running, applied (with the
        operations it made) or failed (with its error)."""
        try:
            uid, session, agent = scope.parse_job_id(job_id)
        except scope.ScopeError as exc:
            raise ToolError(f"no job {job_id!r}") from exc
        found = await run(worker.job, (user(ctx, uid), session, agent))
        if found is None:
            raise ToolError(f"no job {job_id!r}")
        return found

    @mcp.tool()
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=4000)],
        user_id: str,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        verbose: bool = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, SearchResults]:
        """Search what is remembered about the user (hybrid semantic + keyword), best
        first. Each hit: content, kind (fact, or episode: a turn of a past
        conversation), date, id. verbose=true gives each hit's full record and score."""
        hits = await run(memory.search, query, user_id=user(ctx, user_id), limit=limit)
        found = SearchResults(
            results=[
                SearchResult(
                    memory=MemoryOut.of(h.memory), score=h.score, kind=h.kind, speaker=h.speaker
                )
                if verbose
                else CompactHit.of(h)
                for h in hits
            ]
        )
        return compact_result(found)

    @mcp.tool()
    async def answer(
        question: Annotated[str, Field(min_length=1, max_length=4000)],
        user_id: str,
        ctx: Context | None = None,
    ) -> AnswerResult:
        """Answer a question about the user from memory; says so when it is not known."""
        try:
            await run(worker.ensure_llm)
            ans = await run(memory.answer, question, user_id=user(ctx, user_id))
        except LLMError as exc:
            raise ToolError(f"the language model is unavailable: {exc}") from exc
        return AnswerResult(
            answer=ans.text, memories=[MemoryOut.of(h.memory) for h in ans.memories]
        )

    @mcp.tool()
    async def list_memories(
        user_id: str,
        limit: Annotated[int, Field(ge=1, le=1000)] = 200,
        ctx: Context | None = None,
    ) -> MemoryListing:
        """Everything remembered about the user, oldest first."""
        mems = await run(memory.get_all, user_id=user(ctx, user_id), limit=limit)
        return MemoryListing(
            user_id=user_id, count=len(mems), memories=[MemoryOut.of(m) for m in mems]
        )

    @mcp.tool()
    async def memory_history(memory_id: str, ctx: Context | None = None) -> HistoryOut:
        """How one memory changed over time (its add, updates and any deletion)."""
        caller = _tenant(ctx, tenant, keys)
        try:
            scope.check_id(memory_id, "memory_id")
        except scope.ScopeError as exc:
            raise ToolError(str(exc)) from exc

        def history() -> HistoryOut | None:
            entries = memory.history(memory_id)
            owner = next((e.user_id for e in entries if e.user_id), None)
            if owner is None:
                mem = memory.get(memory_id)
                owner = mem.user_id if mem is not None else None
            if not entries or owner is None or not scope.owned_by(owner, caller):
                return None
            return HistoryOut.of(memory_id, entries)

        found = await run(history)
        if found is None:
            raise ToolError(f"no memory {memory_id!r}")
        return found

    return mcp


class McpKeyGuard:
    """Refuse streamable-HTTP requests without a valid API key (401)."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, str]) -> None:
        self.app = app
        self.keys = dict(keys)

    async def __call__(self, scope_: Scope, receive: Receive, send: Send) -> None:
        if scope_["type"] == "http" and tenant_for_key(self.keys, supplied_key(scope_)) is None:
            body = (
                b'{"type":"about:blank","title":"Unauthorized","status":401,'
                b'"detail":"send your API key as Authorization: Bearer KEY or X-API-Key: KEY"}'
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/problem+json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope_, receive, send)
