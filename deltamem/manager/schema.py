"""JSON schemas that constrain the manager's output (llama.cpp grammar, or
`response_format` on OpenAI-compatible servers), so every reply parses."""

from __future__ import annotations

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
_UPDATE = {
    "type": "object",
    "properties": {
        "op": {"const": "update"},
        "id": {"type": "string"},
        "type": {"enum": MEMORY_TYPES},
        "content": _CONTENT,
    },
    "required": ["op", "id", "type", "content"],
}
_NONE = {
    "type": "object",
    "properties": {"op": {"const": "none"}, "id": {"type": "string"}},
    "required": ["op", "id"],
}

OPERATIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "items": {"anyOf": [_ADD, _UPDATE, _NONE]},
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

SEARCH_OR_OPERATIONS: dict[str, Any] = {"anyOf": [SEARCH, OPERATIONS]}
