"""Errors as RFC 9457 problem details (``application/problem+json``), and the two
ASGI guards that run before any route: the API-key check and the body size limit.

Every error the API returns has ``type``, ``title``, ``status`` and ``detail``;
none carries a stack trace or the values a caller sent.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deltamem.llm.base import LLMError
from deltamem.memory import InvalidSession
from deltamem.server.config import tenant_for_key
from deltamem.server.scope import ScopeError, for_caller
from deltamem.store.base import SessionConflict

log = logging.getLogger("deltamem.server")

PROBLEM_JSON = "application/problem+json"


class ApiError(Exception):
    """An error with its HTTP status and a message meant for the caller."""

    def __init__(self, status: int, detail: str, title: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.extra = extra


def problem_body(
    status: int, detail: str, title: str | None = None, instance: str | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    body.update(extra)
    return body


def problem(
    status: int,
    detail: str,
    title: str | None = None,
    *,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse(
        problem_body(status, detail, title, instance, **extra),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=dict(headers or {}),
    )


def _where(loc: Any) -> str:
    return ".".join(str(p) for p in loc) if isinstance(loc, (list, tuple)) else str(loc)


def validation_problem(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        reason = (first.get("ctx") or {}).get("error", "")
        return problem(
            400,
            f"the request body is not valid JSON{': ' + str(reason) if reason else ''}",
            "Malformed JSON",
            instance=request.url.path,
        )
    # locations and messages only: the rejected values are the caller's data
    clean = [
        {
            "loc": [str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors[:20]
    ]
    detail = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in clean[:5]) or "invalid request"
    if any(_over_size_limit(list(e["loc"]), str(e["type"])) for e in errors):
        # a session over the documented size limits (docs/server.md): 413, as a body
        # over the byte limit, so that a client treats every "too big" alike
        return problem(413, detail, "Session too large", instance=request.url.path, errors=clean)
    return problem(422, detail, "Invalid request", instance=request.url.path, errors=clean)


def _over_size_limit(loc: list[Any], kind: str) -> bool:
    """A session with too many messages, or a message whose content is too long."""
    loc = [str(p) for p in loc]
    if loc[:2] != ["body", "messages"]:
        return False
    if kind not in ("too_long", "string_too_long"):
        return False
    return len(loc) == 2 or (len(loc) == 4 and loc[3] == "content")


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return problem(
            exc.status,
            exc.detail,
            exc.title,
            instance=request.url.path,
            headers=headers,
            **exc.extra,
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return validation_problem(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        title = None
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail, title = "the request body could not be parsed as JSON", "Malformed JSON"
        return problem(
            exc.status_code,
            detail,
            title,
            instance=request.url.path,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(InvalidSession)
    async def _bad_session(request: Request, exc: InvalidSession) -> Response:
        return problem(422, str(exc), "Invalid session", instance=request.url.path)

    @app.exception_handler(ScopeError)
    async def _bad_id(request: Request, exc: ScopeError) -> Response:
        return problem(422, str(exc), "Invalid identifier", instance=request.url.path)

    @app.exception_handler(SessionConflict)
    async def _conflict(request: Request, exc: SessionConflict) -> Response:
        detail = for_caller(str(exc), exc.user_id)
        return problem(409, detail, "Session conflict", instance=request.url.path)

    @app.exception_handler(LLMError)
    async def _llm(request: Request, exc: LLMError) -> Response:
        log.warning("LLM error on %s: %s", request.url.path, exc)
        return problem(
            503,
            f"the language model is unavailable: {exc}",
            "LLM unavailable",
            instance=request.url.path,
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        ref = uuid.uuid4().hex[:12]
        log.exception("unhandled error %s on %s %s", ref, request.method, request.url.path)
        return problem(
            500,
            f"the server failed to handle this request (reference {ref}); "
            "the error is in the server log",
            instance=request.url.path,
            reference=ref,
        )


# --- ASGI guards ---------------------------------------------------------------------
async def _send_problem(
    send: Send, status: int, detail: str, headers: dict[str, str], title: str | None = None
) -> None:
    body = json.dumps(problem_body(status, detail, title)).encode("utf-8")
    raw = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


# the media types an export file (JSON Lines) is taken as, by the import route
JSON_LINES = ("application/x-ndjson", "application/jsonl", "application/json-lines")


class BodyLimit:
    """Refuse a request body over `max_bytes` with 413, whether or not it declares
    its length, before any of it is parsed; under `prefix`, refuse a body that is not
    declared JSON (415) or is not UTF-8 (400)."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        prefix: str = "/v1",
        import_max_bytes: int | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.prefix = prefix  # bodies under it must be UTF-8 JSON (JSON Lines: an import)
        # an import's body is a user's whole export file (POST /v1/users/{id}/import)
        self.import_max_bytes = import_max_bytes or max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        importing = path.startswith(f"{self.prefix}/users/") and path.endswith("/import")
        limit = self.import_max_bytes if importing else self.max_bytes
        too_big = f"the request body is larger than {limit} bytes"
        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _send_problem(send, 400, "invalid Content-Length header", {})
                return
            if int(declared) > limit:
                await _send_problem(send, 413, too_big, {"connection": "close"})
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            part = msg.get("body", b"")
            total += len(part)
            if total > limit:
                await _send_problem(send, 413, too_big, {"connection": "close"})
                return
            chunks.append(part)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and path.startswith(self.prefix):
            media = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            lines = importing and media in JSON_LINES
            if media != "application/json" and not media.endswith("+json") and not lines:
                await _send_problem(
                    send, 415, "send the body as JSON with 'Content-Type: application/json'", {}
                )
                return
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                await _send_problem(
                    send,
                    400,
                    f"the request body is not valid UTF-8 (byte {exc.start})",
                    {},
                    title="Malformed JSON",
                )
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class ApiKeyAuth:
    """Map the API key of each request under `prefix` to its tenant (set as
    ``request.state.tenant``), or answer 401. Keys come as ``Authorization: Bearer
    KEY`` or ``X-API-Key: KEY``."""

    def __init__(
        self,
        app: ASGIApp,
        keys: Mapping[str, str],
        prefix: str = "/v1",
        paths: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.keys = dict(keys)
        self.prefix = prefix
        self.paths = paths  # outside `prefix`, behind the keys too (/metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        guarded = path.startswith(self.prefix) or path in self.paths
        if scope["type"] != "http" or not guarded:
            await self.app(scope, receive, send)
            return
        supplied = supplied_key(scope)
        tenant = tenant_for_key(self.keys, supplied)
        if tenant is None:
            detail = (
                "the API key is not valid"
                if supplied
                else "send your API key as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
            )
            await _send_problem(send, 401, detail, {"www-authenticate": "Bearer"})
            return
        scope.setdefault("state", {})["tenant"] = tenant
        await self.app(scope, receive, send)


def supplied_key(scope: Scope) -> str | None:
    auth = _header(scope, b"authorization")
    if auth:
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = _header(scope, b"x-api-key")
    return key.strip() if key and key.strip() else None
