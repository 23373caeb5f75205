"""Fuzzing the REST API: schemathesis from its OpenAPI spec, plus hand-made bad bodies.

In process, through the ASGI app, with a scripted LLM and a real SQLite store (the
same fuzzing on PostgreSQL: tests/test_api_fuzz_pg.py; shared parts:
tests/fuzzing.py). The worker is not started, so the store changes only through
the request under test: after every request answered 4xx, the session log, the
memories and their history must be exactly as before. No request may get a 5xx.
Bounded: a few dozen examples per operation (``FUZZ_EXAMPLES``), deterministic
(derandomized).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from fastapi.testclient import TestClient  # noqa: E402
from fuzzing import (  # noqa: E402
    FUZZ_SETTINGS,
    HEADERS,
    Fuzzed,
    check_fuzzed_request,
    check_reached_the_handlers,
)

from deltamem.store.sqlite import SQLiteStore  # noqa: E402


def _make_fuzzed() -> Fuzzed:
    import tempfile

    from deltamem.embed import make_embedder

    root = Path(tempfile.mkdtemp(prefix="deltamem-fuzz-"))
    embedder = make_embedder("local")
    store = SQLiteStore(root / "fuzz.db", dim=embedder.dim, embedder_name=embedder.name)
    return Fuzzed(store, embedder, root / "fuzz.db")


# schemathesis' pytest plugin needs the schema at import time (its lazy
# `from_fixture` loader fails under pytest 9), so the app is built here, once.
_FUZZED = _make_fuzzed()
schema = schemathesis.openapi.from_asgi("/openapi.json", _FUZZED.app)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    try:
        yield _FUZZED
    finally:
        _FUZZED.memory.close()
        import shutil

        assert isinstance(_FUZZED.where, Path)
        shutil.rmtree(_FUZZED.where.parent, ignore_errors=True)


@pytest.mark.timeout(120)
@schema.parametrize()
@FUZZ_SETTINGS
def test_fuzzed_requests_get_no_5xx_and_rejected_ones_write_nothing(
    case: Any, fuzzed: Fuzzed
) -> None:
    check_fuzzed_request(case, fuzzed)


def test_the_fuzzer_reached_the_handlers() -> None:
    """Run after the fuzz test."""
    if not _FUZZED.seen:
        pytest.skip("run with the fuzz test")
    check_reached_the_handlers(_FUZZED.seen)


# --- hand-made bad bodies ------------------------------------------------------------------
GOOD = {
    "user_id": "u",
    "session_id": "s1",
    "timestamp": "2029-02-13T10:51:39",
    "messages": [{"role": "user", "content": "hello"}],
}
J = {"content-type": "application/json"}

BAD_SESSIONS: list[tuple[str, bytes | str, dict[str, str], set[int]]] = [
    ("invalid UTF-8 in a user id", b'{"user_id": "\xc3\x28", "messages": []}', J, {400}),
    ("UTF-16 body", json.dumps(GOOD).encode("utf-16"), J, {400}),
    ("overlong UTF-8 encoding", b'{"user_id": "\xc0\xaf", "messages": []}', J, {400}),
    ("NaN timestamp", json.dumps({**GOOD, "timestamp": float("nan")}), J, {400, 422}),
    ("huge integer", '{"user_id": ' + "9" * 5000 + ', "messages": []}', J, {400, 422}),
    ("user id is an object", json.dumps({**GOOD, "user_id": {"$ne": ""}}), J, {422}),
    ("messages is an object", json.dumps({**GOOD, "messages": {"0": GOOD["messages"]}}), J, {422}),
    ("message is a list", json.dumps({**GOOD, "messages": [["user", "hi"]]}), J, {422}),
    (
        "content is null",
        json.dumps({**GOOD, "messages": [{"role": "user", "content": None}]}),
        J,
        {422},
    ),
    (
        "content is bool",
        json.dumps({**GOOD, "messages": [{"role": "user", "content": True}]}),
        J,
        {422},
    ),
    (
        "content too long",
        json.dumps({**GOOD, "messages": [{"role": "user", "content": "x" * 200_000}]}),
        J,
        {413, 422},
    ),
    (
        "huge session",
        json.dumps({**GOOD, "messages": [{"role": "user", "content": "word " * 900}] * 100}),
        J,
        {413},
    ),
    ("session id too long", json.dumps({**GOOD, "session_id": "s" * 257}), J, {422}),
    ("agent id with a NUL", json.dumps({**GOOD, "agent_id": "a\u0000b"}), J, {422}),
    ("timestamp far too long", json.dumps({**GOOD, "timestamp": "2029" * 40}), J, {422}),
    ("timestamp year 99999", json.dumps({**GOOD, "timestamp": "99999-01-01"}), J, {422}),
    ("empty body", b"", J, {400, 422}),
    ("JSON string", b'"hello"', J, {422}),
    ("truncated JSON", json.dumps(GOOD)[:-3], J, {400}),
    (
        "form-encoded",
        "user_id=u&messages=hi",
        {"content-type": "application/x-www-form-urlencoded"},
        {415},
    ),
    ("no content type", json.dumps(GOOD), {"content-type": ""}, {400, 415, 422}),
]


@pytest.mark.parametrize(
    ("what", "body", "headers", "statuses"), BAD_SESSIONS, ids=[b[0] for b in BAD_SESSIONS]
)
def test_bad_session_bodies_are_rejected_and_write_nothing(
    fuzzed: Fuzzed, what: str, body: bytes | str, headers: dict[str, str], statuses: set[int]
) -> None:
    before = fuzzed.snapshot()
    with TestClient(fuzzed.app, raise_server_exceptions=False) as client:
        r = client.post("/v1/sessions", content=body, headers={**HEADERS, **headers})
    assert r.status_code in statuses, (what, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in r.text
    assert fuzzed.snapshot() == before


@pytest.mark.parametrize("path", ["/v1/search", "/v1/answer", "/v1/users/u/replay"])
@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe\x00",
        b'{"query": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"question": 1, "query": 1, "user_id": ["u"], "agent_id": 3}',
        b'{"query": "q", "question": "q", "user_id": "u", "limit": 1e400}',
        b'{"query": "q", "question": "q", "user_id": "u", "limit": "5"}',
        b'{"agent_id": {"a": 1}}',
    ],
)
def test_bad_read_and_replay_bodies_are_4xx(fuzzed: Fuzzed, path: str, body: bytes) -> None:
    before = fuzzed.snapshot()
    with TestClient(fuzzed.app, raise_server_exceptions=False) as client:
        r = client.post(path, content=body, headers={**HEADERS, **J})
    assert 400 <= r.status_code < 500, (path, body[:40], r.status_code, r.text[:300])
    assert fuzzed.snapshot() == before
