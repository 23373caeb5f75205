"""Who is looking at the inspector, and whether a form post is theirs.

A request to ``/ui`` is let in by, in order:

1. an API key in ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (scripts): the
   key's tenant, as on the REST API;
2. the session cookie set by the login form (which takes an API key): HttpOnly,
   SameSite=Strict, Path=/ui, Secure over HTTPS; the server keeps the session
   (random token -> tenant, CSRF token, expiry) in memory, so a restart logs
   everyone out and the cookie never holds the key;
3. only in ``deltamem ui`` (`local`): a client on the loopback interface that names
   the server by a loopback host, with no key at all, seeing the whole store.
   Checking the Host header too keeps a web page that rebinds its own domain to
   127.0.0.1 (DNS rebinding) out.

Anything else is refused. Cross-site requests: every form carries a CSRF token
(synchronizer token: per login session, or per server for the loopback viewer)
that a POST must echo, and a POST whose ``Origin`` names another host or whose
``Sec-Fetch-Site`` says cross-site is refused, before the token is even read.
Requests authenticated by a header need no token: browsers never add that
header on their own.
"""

from __future__ import annotations

import ipaddress
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from starlette.requests import Request

from deltamem import ids
from deltamem.server import scope
from deltamem.server.config import tenant_for_key

COOKIE = "deltamem_ui"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 10_000
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


@dataclass(frozen=True)
class Viewer:
    """Whose memory a request may see: a tenant's users, or (tenant None, the local
    inspector) every user of the store, by their stored ids."""

    tenant: str | None
    via: Literal["header", "cookie", "loopback"]
    csrf: str = ""  # the token forms carry (none needed for header-authenticated scripts)

    def internal(self, user_id: str) -> str:
        """The store's user id for a user id of this viewer (raises ScopeError)."""
        if self.tenant is None:  # a library user id (it may be tenant-scoped: longer)
            try:
                return ids.check_id(user_id, "user_id", ids.MAX_USER_ID_CHARS)
            except ids.InvalidId as exc:
                raise scope.ScopeError(str(exc)) from None
        return scope.internal_user(self.tenant, user_id)

    @property
    def prefix(self) -> str:
        return "" if self.tenant is None else f"{self.tenant}:"

    def external(self, internal_user_id: str) -> str:
        return internal_user_id[len(self.prefix) :]

    def owns(self, internal_user_id: str | None, user_id: str) -> bool:
        """Whether a stored user id is this viewer's user `user_id`."""
        if internal_user_id is None:
            return False
        if self.tenant is None:
            return internal_user_id == user_id
        return scope.owned_by(internal_user_id, self.tenant, user_id)


@dataclass
class _Login:
    tenant: str
    csrf: str
    expires: float


def _host_name(host_header: str) -> str:
    """The host of a Host header, without port or IPv6 brackets."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(request: Request) -> bool:
    """A client on the loopback interface that addresses the server as a loopback
    host (not a rebound domain name)."""
    client = request.client.host if request.client else ""
    try:
        if not ipaddress.ip_address(client).is_loopback:
            return False
    except ValueError:
        return False
    return _host_name(request.headers.get("host", "")) in LOOPBACK_HOSTS


def header_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


class UiAuth:
    """Logins of the inspector, over the API keys of the REST API."""

    def __init__(self, keys: Mapping[str, str], *, local: bool = False) -> None:
        self.keys = dict(keys)
        self.local = local
        self._local_csrf = secrets.token_urlsafe(32)
        self._logins: dict[str, _Login] = {}
        self._lock = threading.Lock()

    def viewer(self, request: Request) -> Viewer | None:
        """The viewer a request authenticates as, or None (401 / the login form)."""
        supplied = header_key(request)
        if supplied is not None:
            tenant = tenant_for_key(self.keys, supplied)
            return None if tenant is None else Viewer(tenant, "header")
        token = request.cookies.get(COOKIE)
        if token:
            with self._lock:
                login = self._logins.get(token)
                if login is not None and login.expires < time.time():
                    del self._logins[token]
                    login = None
            if login is not None:
                return Viewer(login.tenant, "cookie", login.csrf)
        if self.local and is_loopback(request):
            return Viewer(None, "loopback", self._local_csrf)
        return None

    def login(self, key: str) -> str | None:
        """A new session token for a valid API key, else None."""
        tenant = tenant_for_key(self.keys, key.strip())
        if tenant is None:
            return None
        token = secrets.token_urlsafe(32)
        now = time.time()
        with self._lock:
            for t in [t for t, s in self._logins.items() if s.expires < now]:
                del self._logins[t]
            if len(self._logins) >= MAX_SESSIONS:  # drop the oldest
                del self._logins[min(self._logins, key=lambda t: self._logins[t].expires)]
            self._logins[token] = _Login(tenant, secrets.token_urlsafe(32), now + SESSION_SECONDS)
        return token

    def logout(self, token: str | None) -> None:
        if token:
            with self._lock:
                self._logins.pop(token, None)


def cross_site(request: Request) -> bool:
    """Whether the browser says this request comes from another site."""
    if request.headers.get("sec-fetch-site", "") == "cross-site":
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()


def csrf_ok(request: Request, viewer: Viewer, token: str) -> bool:
    """Whether a state-changing request may go ahead (see the module docstring)."""
    if cross_site(request):
        return False
    if viewer.via == "header":
        return True
    return bool(token) and secrets.compare_digest(token, viewer.csrf)
