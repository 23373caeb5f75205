"""Fuzzing the REST API, shared by the SQLite and PostgreSQL runs
(tests/test_api_fuzz.py, tests/test_api_fuzz_pg.py): the app under test on a
real store, a fingerprint of what the store holds, and the checks each fuzzed
request must pass. Same settings on both backends.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import schemathesis
from fakes import SESSION, ScriptedLLM
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.store.base import Store

KEY = "key-of-tenant-f-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
MAX_BODY = 256 * 1024  # small, so that "huge" bodies are cheap to send
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
SNAPSHOT_SQL = (
    "SELECT seq, user_id, agent_id, session_id, status, content_hash FROM sessions ORDER BY seq",
    "SELECT id, user_id, content, version FROM memories ORDER BY id",
    "SELECT id, memory_id, op FROM history ORDER BY id",
)


@schemathesis.serializer("application/x-ndjson")
def _json_lines(ctx: Any, value: Any) -> bytes:
    """An import's body (an export file, JSON Lines): the fuzzed string as is."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text.encode("utf-8", "surrogatepass")


class Fuzzed:
    """The app under fuzzing and a way to fingerprint what its store holds. The
    worker is not started, so the store changes only through the request under test.
    `where`: the SQLite file, or the PostgreSQL DSN of the store's schema."""

    def __init__(self, store: Store, embedder: Embedder, where: Path | str) -> None:
        self.where = where
        self.memory = Memory(
            llm=ScriptedLLM(default={"operations": []}),
            embedder=embedder,
            store=store,
            config=SESSION,  # the scripted reply is an operation list
        )
        self.app: FastAPI = create_app(
            self.memory, {KEY: "f"}, start_worker=False, max_body_bytes=MAX_BODY
        )
        self.seen: Counter[str] = Counter()  # "METHOD path status" of every fuzzed request
        # something to find: one applied session with a memory, so ids and users exist
        self.memory.add(
            [{"role": "user", "content": "I keep bees."}],
            user_id="f:seed",
            session_id="seed",
            timestamp="2029-01-01T00:00:00",
        )

    def snapshot(self) -> tuple[Any, ...]:
        if isinstance(self.where, Path):
            conn = sqlite3.connect(f"file:{self.where}?mode=ro", uri=True)
            try:
                return tuple(tuple(conn.execute(sql).fetchall()) for sql in SNAPSHOT_SQL)
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.where, autocommit=True) as conn:
            return tuple(tuple(conn.execute(sql).fetchall()) for sql in SNAPSHOT_SQL)


def check_fuzzed_request(case: Any, fuzzed: Fuzzed) -> None:
    """Every default schemathesis check (no 5xx, documented status codes and content
    types, response bodies matching the spec, schema-invalid data rejected, ...)
    except positive_data_acceptance: the spec cannot say that timestamps must parse
    (nor, without patterns, which characters an id may hold), so some schema-valid
    bodies are rightly answered 422 (checked here to write nothing)."""
    before = fuzzed.snapshot()
    headers = {**HEADERS, **(case.headers or {})}
    response = case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])
    fuzzed.seen[f"{case.method} {case.operation.path} {response.status_code}"] += 1
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    if 400 <= response.status_code < 500:
        assert fuzzed.snapshot() == before, (case.method, case.formatted_path, response.text)
        content_type = (response.headers.get("content-type") or [""])[0]
        assert content_type.startswith("application/problem+json"), content_type
        assert "Traceback" not in response.text


def check_reached_the_handlers(seen: Counter[str]) -> None:
    """Not all rejected at the door: some fuzzed requests were accepted (2xx) and some
    rejected by validation (4xx), on several operations."""
    statuses = Counter(k.rsplit(" ", 1)[1][0] for k in seen.elements())
    print("fuzzed requests by status class:", dict(statuses), "total", sum(seen.values()))
    assert statuses["2"] > 0 and statuses["4"] > 0, seen
    assert statuses["5"] == 0
    assert len({k.rsplit(" ", 1)[0] for k in seen}) >= 8, seen
