"""What the REST routes share: the caller's tenant, the ids of paths and queries,
and the checks that a memory found by its id is the caller's (404 otherwise).

Used by `deltamem.server.app` and `deltamem.server.routes_inspect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.security import APIKeyHeader, HTTPBearer
from pydantic import AfterValidator

from deltamem.memory import Memory
from deltamem.server import scope
from deltamem.server.problems import ApiError
from deltamem.types import HistoryEntry, MemoryItem

# Declared for the OpenAPI spec; the check itself is the ApiKeyAuth middleware,
# which runs before the body is read.
_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer API_KEY")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: API_KEY")


def _tenant(
    request: Request,
    _b: Annotated[Any, Depends(_bearer)] = None,
    _k: Annotated[Any, Depends(_api_key)] = None,
) -> str:
    tenant = getattr(request.state, "tenant", None)
    if tenant is None:  # only reachable if the middleware is bypassed
        raise ApiError(401, "an API key is required")
    return tenant


Tenant = Annotated[str, Depends(_tenant)]


def _id(what: str) -> AfterValidator:
    """Ids in paths and queries follow the grammar of `deltamem.ids` (422 otherwise):
    every id a write accepts is one these routes can be given back."""
    return AfterValidator(lambda v: v if v is None else scope.check_id(v, what))


_ID = {"min_length": 1, "max_length": scope.MAX_ID_CHARS}
UserQuery = Annotated[str, Query(**_ID, description="the user's id"), _id("user_id")]
OptUserQuery = Annotated[
    str | None,
    Query(**_ID, description="if given, the memory must be this user's"),
    _id("user_id"),
]
UserFilter = Annotated[str | None, Query(**_ID, description="only this user's"), _id("user_id")]
AgentQuery = Annotated[str | None, Query(**_ID), _id("agent_id")]
SessionQuery = Annotated[str | None, Query(**_ID), _id("session_id")]
UserPath = Annotated[str, Path(**_ID, description="the user's id"), _id("user_id")]
SessionPath = Annotated[str, Path(**_ID), _id("session_id")]
MemoryPath = Annotated[str, Path(**_ID), _id("memory_id")]


def internal(tenant: str, user_id: str) -> str:
    return scope.internal_user(tenant, user_id)


def owned(mem: MemoryItem | None, tenant: str, user_id: str | None, memory_id: str) -> MemoryItem:
    """The memory if it is the tenant's (and the named user's), else 404."""
    if mem is None or not scope.owned_by(mem.user_id, tenant, user_id):
        raise ApiError(404, f"no memory {memory_id!r}")
    return mem


def check_history_owner(
    memory: Memory,
    entries: Sequence[HistoryEntry],
    tenant: str,
    user_id: str | None,
    memory_id: str,
) -> None:
    """404 unless the history (of a live or a deleted memory) is the tenant's."""
    owner = next((e.user_id for e in entries if e.user_id), None)
    if owner is None:  # a store that does not say whose history it is
        mem = memory.get(memory_id)
        owner = mem.user_id if mem is not None else None
    if not entries or owner is None or not scope.owned_by(owner, tenant, user_id):
        raise ApiError(404, f"no memory {memory_id!r}")
