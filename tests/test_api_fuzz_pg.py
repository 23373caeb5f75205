"""The REST API fuzzing of tests/test_api_fuzz.py, with the same settings and checks
(tests/fuzzing.py), on a PostgreSQL store: no response >= 500 here either (a NUL
in an id or a text used to reach psycopg as a DataError and answer 500), and a
rejected request writes nothing. Skipped without the `pgserver` wheel and psycopg.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("psycopg")
pytest.importorskip("pgserver")

from fuzzing import (  # noqa: E402
    FUZZ_SETTINGS,
    Fuzzed,
    check_fuzzed_request,
    check_reached_the_handlers,
)
from pg import acquire_server, fresh_schema_dsn, pgvector_works, release_server  # noqa: E402

from deltamem.store.postgres import PostgresStore  # noqa: E402


def _make_fuzzed() -> Fuzzed:
    from deltamem.embed import make_embedder

    embedder = make_embedder("local")
    acquire_server()  # released by the `fuzzed` fixture, which stops the server if last
    dsn = fresh_schema_dsn()
    store = PostgresStore(dsn, dim=embedder.dim, embedder_name=embedder.name)
    return Fuzzed(store, embedder, dsn)


# built at import time, as in tests/test_api_fuzz.py (schemathesis needs the schema then)
_FUZZED = _make_fuzzed()
schema = schemathesis.openapi.from_asgi("/openapi.json", _FUZZED.app)
# Where pgvector cannot compute a distance (see tests/pg.py), a search crashes the
# PostgreSQL backend itself: the operations that search are left out there, and
# the run says so; everywhere else every operation is fuzzed.
SEARCHING = ["/v1/search", "/v1/answer"]
if not pgvector_works():
    schema = schema.exclude(path=SEARCHING)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    try:
        yield _FUZZED
    finally:
        _FUZZED.memory.close()
        release_server()


@pytest.mark.timeout(300)
@schema.parametrize()
@FUZZ_SETTINGS
def test_fuzzed_requests_on_postgres_get_no_5xx_and_rejected_ones_write_nothing(
    case: Any, fuzzed: Fuzzed
) -> None:
    check_fuzzed_request(case, fuzzed)


def test_the_fuzzer_reached_the_handlers_on_postgres() -> None:
    """Run after the fuzz test."""
    if not _FUZZED.seen:
        pytest.skip("run with the fuzz test")
    check_reached_the_handlers(_FUZZED.seen)


def test_the_searching_operations_were_fuzzed_too() -> None:
    if not pgvector_works():
        pytest.skip(f"pgvector crashes on this CPU (tests/pg.py): {SEARCHING} not fuzzed here")
    fuzzed = {k.split()[1] for k in _FUZZED.seen}
    assert set(SEARCHING) <= fuzzed, fuzzed
