"""benchmarks/search_users.py (search over many users) at a tiny size: it runs on
SQLite and on PostgreSQL, and on PostgreSQL its COPY load leaves, row for row, what
the store's own write path (`log_session`, then `apply_session`) leaves, vectors
included, so that the figures it gives are those of a store the service wrote."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes import DIM
from pg import PgServer, fresh_schema, pg_server_fixture, pgvector_works
from test_search_ranking import HashEmbedder

from deltamem.retrieval.hybrid import HybridSearcher

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--users", "6", "--facts-per-user", "10", "--episodes-per-user", "5"]
TINY += ["--sessions-per-user", "2", "--queries", "12", "--warm-users", "3", "--json"]

_pg_server = pg_server_fixture()


def bench() -> ModuleType:
    if "search_users" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "search_users", ROOT / "benchmarks" / "search_users.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["search_users"] = module
        spec.loader.exec_module(module)
    return sys.modules["search_users"]


def check_result(result: dict[str, Any], conditions: set[str]) -> None:
    assert (result["users"], result["facts"], result["episodes"]) == (6, 60, 30)
    assert set(result["search"]) == conditions
    for cond in conditions:
        for tiers in ("all", "facts"):
            got = result["search"][cond][tiers]
            assert 0 < got["p50_ms"] <= got["p99_ms"] <= got["max_ms"]


def test_many_users_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench().main(TINY, embedder=HashEmbedder())
    check_result(result, {"cold", "warm"})
    assert result["load"] == "store"
    assert '"facts": 60' in capsys.readouterr().out


def test_many_users_on_postgres(pg_server: PgServer) -> None:
    if not pgvector_works():
        pytest.skip("pgvector crashes on this CPU (tests/pg.py)")
    args = [*TINY, "--backend", "postgres", "--dsn", pg_server.uri, "--explain"]
    result = bench().main(args, embedder=HashEmbedder())
    check_result(result, {"cold", "warm", "sql"})
    assert result["load"] == "copy"
    assert result["tables_mb"]["memories"]["rows"] == 60
    assert result["schema_mb"] >= result["tables_mb"]["memories"]["total"] > 0
    assert any("on memories" in line for line in result["explain_knn"])
    assert any("<query vector>" in line for line in result["explain_knn"])


# What differs between two loads of the same memory: the instants written, and the
# memory ids (a fresh uuid each), compared through the memory they name instead.
VOLATILE = {"created_at", "updated_at", "applied_at", "at"}


def table_rows(conn: Any, table: str, order: str) -> list[dict[str, Any]]:
    """The table's rows (vectors and tsvectors as text), each memory id replaced by
    (user, content) of its memory, the instants left out."""
    names = {
        r[0]: f"{r[1]}:{r[2]}" for r in conn.execute("SELECT id, user_id, content FROM memories")
    }
    rows = [r[0] for r in conn.execute(f"SELECT to_jsonb(t) FROM {table} t ORDER BY {order}")]
    for row in rows:
        for key in VOLATILE & row.keys():
            del row[key]
        key = {"memories": "id", "history": "memory_id"}.get(table)
        if key is not None:
            row[key] = names[row[key]]
        for op in row.get("operations") or []:
            op["memory_id"] = names[op["memory_id"]]
    return rows


def test_copy_load_writes_what_the_store_writes(pg_server: PgServer) -> None:
    from deltamem.store.postgres import PostgresStore

    sb = bench()
    shape = sb.Shape(users=3, facts=7, turns=5, sessions=2, dim=DIM)
    with fresh_schema(pg_server) as by_store, fresh_schema(pg_server) as by_copy:
        stores = [PostgresStore(by_store, dim=DIM), PostgresStore(by_copy, dim=DIM)]
        try:
            sb.load_with_store(stores[0], shape)
            sb.load_with_copy(by_copy, shape)
            with pg_server.connect(by_store) as a, pg_server.connect(by_copy) as b:
                for table, order in [
                    ("sessions", "seq"),
                    ("memories", "seq"),
                    ("history", "id"),
                    ("episodes", "seq"),
                ]:
                    got, want = table_rows(b, table, order), table_rows(a, table, order)
                    assert len(want) == {"sessions": 6, "episodes": 15}.get(table, 21)
                    assert got == want, table
                versions = "SELECT user_id, tier, version FROM search_versions ORDER BY 1, 2"
                want_v = a.execute(versions).fetchall()
                got_v = b.execute(versions).fetchall()
                # a clock value, then one more for each later session that wrote the tier
                assert [r[:2] for r in got_v] == [r[:2] for r in want_v]
                assert all(
                    abs(g[2] - w[2]) < 600_000_000 for g, w in zip(got_v, want_v, strict=True)
                )
            if pgvector_works():  # the same search, hit for hit
                emb = HashEmbedder()
                for user in ("user-000000", "user-000002"):
                    hits = [
                        [(h.memory.content, round(h.score, 6)) for h in s]
                        for s in (
                            HybridSearcher(store, emb).search("Martin likes jazz", user)
                            for store in stores
                        )
                    ]
                    assert hits[0] and hits[0] == hits[1]
        finally:
            for s in stores:
                s.close()
