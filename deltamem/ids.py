"""The one grammar of the ids a caller gives: user, agent, session and memory ids.

An id is 1 to 256 characters of valid Unicode, not all whitespace, with

* no control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F):
  PostgreSQL cannot store a NUL, logs and terminals misread the rest;
* no lone surrogate (not text: it cannot be encoded as UTF-8);
* no ``/``: the REST API takes ids as path segments (``/v1/users/{user_id}/replay``),
  and a ``/`` there, even sent as ``%2F``, is read as a separator by the router (and
  by many proxies), so such an id could be written but never reached;
* not ``.`` or ``..``: HTTP clients and proxies remove those path segments.

Everything else is allowed (spaces, ``:``, ``@``, ``%``, ``?``, ``#``, any script),
and ids are compared exactly as given (no case folding, no normalisation). The same
check runs at every entry (library, command line, REST, MCP), on every backend:
the library raises `InvalidSession` for a session's ids, the REST API answers 422.

A user id given to the library may be longer, `MAX_USER_ID_CHARS`: services built
on it (ours included) scope a 256-character user id by a tenant, as
``tenant:user``.
"""

from __future__ import annotations

import unicodedata

MAX_ID_CHARS = 256
MAX_TENANT_CHARS = 64
MAX_USER_ID_CHARS = MAX_TENANT_CHARS + 1 + MAX_ID_CHARS


class InvalidId(ValueError):
    """An id outside the grammar; the message names the id's role and the fault."""


def id_fault(value: object, max_chars: int = MAX_ID_CHARS) -> str | None:
    """What is wrong with `value` as an id, or None if it is a valid id."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value.strip():
        return "is required" if not value else "must not be blank"
    if len(value) > max_chars:
        return f"is longer than {max_chars} characters"
    for c in value:
        category = unicodedata.category(c)
        if category == "Cs":
            return "is not valid Unicode (lone surrogate)"
        if category == "Cc":
            return f"contains a control character (U+{ord(c):04X})"
    if "/" in value:
        return "contains '/' (ids are URL path segments)"
    if value in (".", ".."):
        return f"cannot be {value!r} (a URL path segment clients remove)"
    return None


def check_id(value: object, what: str = "id", max_chars: int = MAX_ID_CHARS) -> str:
    """`value` if it is a valid id, else InvalidId naming `what` and the fault."""
    fault = id_fault(value, max_chars)
    if fault is not None:
        raise InvalidId(f"{what} {fault}")
    return value  # type: ignore[return-value]  # id_fault checked it is a str


def check_session_key(user_id: object, session_id: object, agent_id: object) -> None:
    """The ids naming a session as the library takes them (session and agent ids are
    optional)."""
    check_id(user_id, "user_id", MAX_USER_ID_CHARS)
    if session_id is not None:
        check_id(session_id, "session_id")
    if agent_id is not None:
        check_id(agent_id, "agent_id")
