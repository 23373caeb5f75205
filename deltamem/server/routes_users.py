"""The REST routes that take a user as a whole: export (a JSON Lines file, streamed)
and import (the same file as the request body); deltamem/porting.py has the format.

Scoped like every route: the user is the caller's tenant's. The file names the user
as the caller does, never with the tenant scoping, so a file exported from one
tenant (or server, or store) imports into another. Both hold the user's lease while
they read or write, so that no worker applies one of the user's sessions meanwhile:
an export is one consistent state, and an import's sessions are queued only once
the memories they were planned against are in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from deltamem.memory import Memory
from deltamem.porting import ExportFormatError, PortCounts, UserExport, parse_export, read_user
from deltamem.porting import import_user as import_file
from deltamem.server import scope
from deltamem.server.lease import LeaseBusy
from deltamem.server.params import Tenant, UserPath, internal
from deltamem.server.problems import JSON_LINES, ApiError
from deltamem.server.schemas import ImportOut, problem_responses
from deltamem.server.worker import Worker
from deltamem.store.base import SessionConflict, StoreError

T = TypeVar("T")

NDJSON = JSON_LINES[0]  # the media type of an export file; the others are taken too


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def add_user_routes(app: FastAPI, memory: Memory, worker: Worker) -> None:
    """Add the routes to `app` (made by `deltamem.server.app.create_app`)."""

    @app.get(
        "/v1/users/{user_id}/export",
        response_class=StreamingResponse,
        tags=["users"],
        responses={
            200: {
                "description": "the user's export file, one JSON object a line",
                "content": {NDJSON: {"schema": {"type": "string"}}},
            },
            **problem_responses(404, 409),
        },
    )
    async def export_user(user_id: UserPath, tenant: Tenant) -> StreamingResponse:
        """Everything of the user as a portable JSON Lines file: a header, the session
        log (messages as sent, status, operations), each memory with its whole history
        and provenance, the episodes (no vectors), an end line. 404 for a user with
        nothing stored."""
        who = internal(tenant, user_id)

        def read() -> UserExport:
            with worker.exclusive(who):
                if who not in memory.store.list_users(who):
                    raise ApiError(404, f"no user {user_id!r}")
                return read_user(memory.store, memory.embedder, who, as_user=user_id)

        try:
            data = await _run(read)
        except LeaseBusy as exc:
            raise ApiError(409, scope.for_caller(str(exc), who), "User busy") from exc
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in user_id)[:64]
        return StreamingResponse(
            data.lines(),
            media_type=NDJSON,
            headers={"content-disposition": f'attachment; filename="{name}.jsonl"'},
        )

    @app.post(
        "/v1/users/{user_id}/import",
        response_model=ImportOut,
        tags=["users"],
        responses=problem_responses(409, 413, 415, 422),
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "an export file (`GET /v1/users/{user_id}/export`, "
                "`deltamem export`), sent as application/x-ndjson",
                "content": {NDJSON: {"schema": {"type": "string"}}},
            }
        },
    )
    async def import_user(user_id: UserPath, tenant: Tenant, request: Request) -> ImportOut:
        """Load an export file into the user, embedding it with this server's embedder.
        Memories keep their ids and sessions their keys; what is here already is left
        as it is, so sending the same file twice changes nothing. 422 for a file of
        another format or version, or a bad line (named); 409 for a session logged
        here with other content. Nothing is written when the answer is an error.
        Imported sessions still pending where they were exported are queued."""
        media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if media not in JSON_LINES:
            raise ApiError(415, f"send the export file with 'Content-Type: {NDJSON}'")
        body = await request.body()
        who = internal(tenant, user_id)
        try:
            parsed = parse_export(body.decode("utf-8").split("\n"))
        except (ExportFormatError, UnicodeDecodeError) as exc:
            raise ApiError(422, str(exc), "Invalid export file") from exc

        def load() -> PortCounts:
            with worker.exclusive(who):
                return import_file(memory.store, memory.embedder, parsed, who)

        try:
            got = await _run(load)
        except LeaseBusy as exc:
            raise ApiError(409, scope.for_caller(str(exc), who), "User busy") from exc
        except SessionConflict as exc:
            raise ApiError(409, scope.for_caller(str(exc), who), "Session conflict") from exc
        except StoreError as exc:
            raise ApiError(409, scope.for_caller(str(exc), who), "Import refused") from exc
        worker.wake()
        return ImportOut(
            user_id=user_id,
            sessions=got.sessions,
            memories=got.memories,
            episodes=got.episodes,
            skipped_sessions=got.skipped_sessions,
            skipped_memories=got.skipped_memories,
            jobs=[
                scope.job_id(user_id, s.session_id, s.agent_id)
                for s in parsed.sessions
                if s.status == "pending"
            ],
        )
