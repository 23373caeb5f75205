"""JSON schemas that constrain the manager's output (llama.cpp grammar, or
`response_format` on OpenAI-compatible servers), so every reply parses, and the
check of a reply against them (`check_operations`, `check_search_or_operations`):
a server that ignores or loosens the schema can answer JSON of another shape
(`{}`, `{"operations": "DROP TABLE"}`), which must be a failed call, not an empty
list of operations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

MEMORY_TYPES = ["persona", "event", "relationship"]
MAX_OPS = 30
# Length is checked after decoding (validate.py): a maxLength in the grammar cuts
# sentences mid-word and makes constrained sampling several times slower.
_CONTENT = {"type": "string"}

_ADD = {
    "type": "object",
    "properties": {
        "op": {"const": "add"},
        "type": {"enum": MEMORY_TYPES},
        "content": _CONTENT,
    },
    "required": ["op", "type", "content"],
}


def _update(ids: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "op": {"const": "update"},
            "id": {"enum": ids},
            "type": {"enum": MEMORY_TYPES},
            "content": _CONTENT,
        },
        "required": ["op", "id", "type", "content"],
    }


def _none(ids: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"op": {"const": "none"}, "id": {"enum": ids}},
        "required": ["op", "id"],
    }


def operations(ids: Sequence[str]) -> dict[str, Any]:
    """The operations reply for a call that showed the memories `ids`.

    Ids are an enum of exactly those shown: a small model shown m1-m5 otherwise
    goes on to "update" m6, m7, ... (copying known memories under invented ids),
    and with nothing shown there is nothing to update, so only adds are possible.
    """
    shown = list(dict.fromkeys(ids))
    items: list[dict[str, Any]] = [_ADD]
    if shown:
        items += [_update(shown), _none(shown)]
    return {
        "type": "object",
        "properties": {
            "operations": {
                "type": "array",
                "items": {"anyOf": items} if len(items) > 1 else items[0],
                "maxItems": MAX_OPS,
            }
        },
        "required": ["operations"],
    }


SEARCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "search": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
    },
    "required": ["search"],
}


def search_or_operations(ids: Sequence[str]) -> dict[str, Any]:
    return {"anyOf": [SEARCH, operations(ids)]}


# --- the check of a reply ---------------------------------------------------------------
# The same shapes as the schemas above, but for one thing: an update or none may name
# an id that was not shown. validate.py has a policy for that (an update of an unknown
# id is kept as an add, a none of one is dropped), so it is not a malformed reply.
MemoryTypeName = Literal["persona", "event", "relationship"]


class _AddOp(BaseModel):
    op: Literal["add"]
    type: MemoryTypeName
    content: str


class _UpdateOp(BaseModel):
    op: Literal["update"]
    id: str
    type: MemoryTypeName
    content: str


class _NoneOp(BaseModel):
    op: Literal["none"]
    id: str


class _OperationsReply(BaseModel):
    operations: list[Annotated[_AddOp | _UpdateOp | _NoneOp, Field(discriminator="op")]]


class _SearchReply(BaseModel):
    search: Annotated[list[str], Field(min_length=1, max_length=3)]


_OPERATIONS = TypeAdapter(_OperationsReply)
_SEARCH = TypeAdapter(_SearchReply)


def _reason(exc: ValidationError) -> str:
    """A short account of what is wrong: where and what, never the whole reply."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in errors[:3]]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def check_operations(reply: dict[str, Any]) -> None:
    """ValueError naming the fault unless `reply` is `{"operations": [op, ...]}` with
    every op an add, update or none carrying its keys with the right types. An empty
    list is valid: nothing to remember."""
    try:
        _OPERATIONS.validate_python(reply, strict=True)
    except ValidationError as exc:
        raise ValueError(_reason(exc)) from None


def check_search_or_operations(reply: dict[str, Any]) -> None:
    """As `check_operations`, or a `{"search": [1-3 queries]}` request."""
    if "operations" in reply:
        check_operations(reply)
        return
    if "search" not in reply:
        raise ValueError("reply: neither 'operations' nor 'search'")
    try:
        _SEARCH.validate_python(reply, strict=True)
    except ValidationError as exc:
        raise ValueError(_reason(exc)) from None
