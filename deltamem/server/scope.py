"""Tenant scoping and job ids: the one place where (tenant, user id) becomes the user
id the store sees, and back.

Every user of a tenant lives in the store as ``f"{tenant}:{user_id}"``. Tenant
names cannot contain ``:``, so the first ``:`` splits an internal id without
ambiguity whatever the user id holds (tenant ``a`` user ``b:c`` is ``a:b:c``; a
tenant named ``a:b`` cannot exist). A read is scoped by building the internal id
from the caller's tenant, never by trusting an id the caller sends; a memory
looked up by its own id is checked with `owned_by` before anything of it is
returned.

A job is one session of the log, so its id is derived from the session's key
(user id, agent id, session id) and needs no table of its own: the id decodes to
that key, and the key is read under the *caller's* tenant, so a job id never
reaches another tenant's session.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from deltamem import ids

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")  # ids.MAX_TENANT_CHARS
MAX_ID_CHARS = ids.MAX_ID_CHARS
JOB_PREFIX = "job_"


class ScopeError(ValueError):
    """An id that cannot name a tenant, user, session or job."""


def check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not TENANT_RE.match(tenant):
        raise ScopeError(
            f"tenant name {tenant!r} is not valid: use 1-64 letters, digits, '_', '.' or '-'"
        )
    return tenant


def check_id(value: str, what: str = "user_id") -> str:
    """A caller-given id (user, agent, session, memory), by the grammar of
    `deltamem.ids`; ScopeError if it is outside it."""
    try:
        return ids.check_id(value, what)
    except ids.InvalidId as exc:
        raise ScopeError(str(exc)) from None


def internal_user(tenant: str, user_id: str) -> str:
    """The store's user id for a tenant's user."""
    return f"{check_tenant(tenant)}:{check_id(user_id)}"


def owned_by(internal_user_id: str, tenant: str, user_id: str | None = None) -> bool:
    """Whether a stored user id belongs to the tenant (and, if given, to that user)."""
    if user_id is not None:
        return internal_user_id == f"{tenant}:{user_id}"
    return internal_user_id.startswith(f"{tenant}:")


def external_user(internal_user_id: str) -> tuple[str, str]:
    """(tenant, user id) of a store user id."""
    tenant, sep, user = internal_user_id.partition(":")
    if not sep or not TENANT_RE.match(tenant):
        raise ScopeError(f"{internal_user_id!r} is not a tenant-scoped user id")
    return tenant, user


def for_caller(message: str, internal_user_id: str | None) -> str:
    """`message` with the store's user id (``tenant:user``, as the message quotes it)
    written as the caller gave it (``user``): an error names the caller's own ids,
    never the tenant scoping."""
    if internal_user_id is None:
        return message
    try:
        _, user = external_user(internal_user_id)
    except ScopeError:
        return message
    return message.replace(repr(internal_user_id), repr(user))


def job_id(user_id: str, session_id: str, agent_id: str | None = None) -> str:
    """The stable job id of a session, from its tenant-free key."""
    raw = json.dumps([user_id, agent_id or "", session_id], ensure_ascii=False)
    return JOB_PREFIX + base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def parse_job_id(value: str) -> tuple[str, str, str | None]:
    """(user id, session id, agent id) of a job id, or ScopeError."""
    if not value.startswith(JOB_PREFIX) or len(value) > 4 * MAX_ID_CHARS * 3:
        raise ScopeError("not a job id")
    body = value[len(JOB_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        user, agent, session = json.loads(raw.decode("utf-8"))
        check_id(user)
        check_id(session, "session_id")
        if agent:
            check_id(agent, "agent_id")
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise ScopeError("not a job id") from exc
    return user, session, agent or None
