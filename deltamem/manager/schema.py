"""JSON schemas that constrain the manager's output (llama.cpp grammar, or
`response_format` on OpenAI-compatible servers), so every reply parses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
