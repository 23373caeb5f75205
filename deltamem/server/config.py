"""API keys and server settings.

Keys map to tenants. They come from, in order: the `keys` argument given to
`serve` (a mapping, a spec string or a file path), the environment variable
``DELTAMEM_API_KEYS`` (``"key1=tenantA,key2=tenantB"``), or the file named by
``DELTAMEM_API_KEYS_FILE`` (one ``key=tenant`` a line, ``#`` comments, or a JSON
object ``{"key": "tenant"}``). With none of these, `serve` makes one random key
for the tenant ``default`` and prints it, so a fresh server is never open.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deltamem.server.scope import ScopeError, check_tenant

log = logging.getLogger("deltamem.server")

ENV_KEYS = "DELTAMEM_API_KEYS"
ENV_KEYS_FILE = "DELTAMEM_API_KEYS_FILE"
DEFAULT_TENANT = "default"
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a 2000-turn session of long messages fits
# an import's body: a user's whole export file (POST /v1/users/{user_id}/import)
DEFAULT_MAX_IMPORT_BYTES = 256 * 1024 * 1024


class ConfigError(ValueError):
    pass


@dataclass
class WorkerSettings:
    poll_interval: float = 2.0  # seconds between looks at the log when nobody wakes the worker
    max_attempts: int = 3  # tries of one session before it is parked as failed
    backoff: float = 2.0  # seconds before the 2nd try, doubled for each further one
    lease_seconds: float = 30.0  # a user's lease lives this long unless renewed (every third)
    lease_wait: float = 120.0  # how long a replay or a synchronous add waits for a lease
    nice: int = 10  # added to the worker thread's niceness (its LLM threads inherit it)
    # Users processed at once, one session at a time per user: one user's hung or slow
    # model does not hold back the others (a local llama.cpp model still runs one call
    # at a time; the others wait for the engine, not for the user).
    concurrency: int = 4
    # On stop, how long a session in hand may take to finish; after that it is left
    # (uncommitted, so pending) for the next worker and its lease is given up.
    stop_grace: float = 3.0
    # Seconds between sweeps of the expired memories (`Memory.sweep_expired`, every
    # user's) in this worker; None: no sweep here (`deltamem sweep` does it on demand).
    sweep_every: float | None = None


def parse_keys(spec: str) -> dict[str, str]:
    """``"key1=tenantA,key2=tenantB"`` (commas or newlines) to a key → tenant map."""
    keys: dict[str, str] = {}
    for part in spec.replace("\n", ",").split(","):
        part = part.strip()
        if not part or part.startswith("#"):
            continue
        key, sep, tenant = part.partition("=")
        key, tenant = key.strip(), tenant.strip()
        if not sep or not key or not tenant:
            raise ConfigError(f"write API keys as key=tenant, got {part[:8]!r}...")
        keys[key] = tenant
    return validate_keys(keys)


def validate_keys(keys: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, tenant in keys.items():
        if not isinstance(key, str) or not key or any(c.isspace() for c in key):
            raise ConfigError("an API key must be a non-empty string without spaces")
        try:
            out[key] = check_tenant(tenant)
        except ScopeError as exc:
            raise ConfigError(str(exc)) from exc
        if len(key) < 16:
            log.warning("API key of tenant %r is shorter than 16 characters", tenant)
    return out


def read_keys_file(path: str | Path) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read API keys file {path}: {exc}") from exc
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"API keys file {path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"API keys file {path} must hold an object key → tenant")
        return validate_keys(data)
    return parse_keys(text)


def load_keys(keys: Mapping[str, str] | str | Path | None = None) -> dict[str, str]:
    """The configured key → tenant map (possibly empty); see the module docstring."""
    if isinstance(keys, Mapping):
        return validate_keys(keys)
    if isinstance(keys, Path):
        return read_keys_file(keys)
    if isinstance(keys, str) and keys.strip():
        spec = keys.strip()
        if spec.startswith("@"):
            return read_keys_file(spec[1:])
        if "=" not in spec and Path(spec).is_file():
            return read_keys_file(spec)
        return parse_keys(spec)
    if os.environ.get(ENV_KEYS, "").strip():
        return parse_keys(os.environ[ENV_KEYS])
    if os.environ.get(ENV_KEYS_FILE, "").strip():
        return read_keys_file(os.environ[ENV_KEYS_FILE])
    return {}


def keys_or_generated(keys: Mapping[str, str] | str | Path | None = None) -> dict[str, str]:
    """Configured keys, or one fresh random key for the default tenant (announced on
    stderr), so that a server is never started without authentication."""
    loaded = load_keys(keys)
    if loaded:
        return loaded
    key = "dm_" + secrets.token_urlsafe(24)
    import sys

    print(
        f"deltamem: no API keys configured ({ENV_KEYS}); generated one for tenant "
        f"{DEFAULT_TENANT!r}:\n  {key}\n"
        f"Send it as 'Authorization: Bearer {key}' or 'X-API-Key: {key}'.",
        file=sys.stderr,
        flush=True,
    )
    return {key: DEFAULT_TENANT}


def tenant_for_key(keys: Mapping[str, str], supplied: str | None) -> str | None:
    """The tenant of an API key, comparing in constant time against every key."""
    if not supplied:
        return None
    found: str | None = None
    given = supplied.encode("utf-8", "surrogatepass")
    for key, tenant in keys.items():
        if secrets.compare_digest(key.encode("utf-8"), given):
            found = tenant
    return found
