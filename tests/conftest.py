"""Shared fixtures: the real embedder (once per run), empty stores of every backend,
and a `Memory` wired to a scripted LLM."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes import DIM, SESSION, ScriptedLLM

from deltamem.embed import Embedder, make_embedder
from deltamem.manager.agent import ManagerConfig
from deltamem.memory import Memory
from deltamem.store.base import Store


def _sqlite_store(tmp_path: Path, dim: int) -> Store:
    from deltamem.store.sqlite import SQLiteStore

    return SQLiteStore(tmp_path / "store.db", dim=dim, embedder_name="test")


def _postgres_store(tmp_path: Path, dim: int) -> Store:
    from pg import fresh_schema_dsn  # a new schema on the run's throwaway server (tests/pg.py)

    from deltamem.store.postgres import PostgresStore

    return PostgresStore(fresh_schema_dsn(), dim=dim, embedder_name="test")


# Backend name -> factory(tmp_path, dim) returning an EMPTY store. A new backend
# (e.g. "postgres") registers its factory here and adds its name to STORE_BACKENDS.
STORE_FACTORIES: dict[str, Callable[[Path, int], Store]] = {
    "sqlite": _sqlite_store,
    "postgres": _postgres_store,
}
STORE_BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each backend, through the abstract `Store` interface only."""
    s = STORE_FACTORIES[request.param](tmp_path, DIM)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return make_embedder("local")


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def make_memory(tmp_path: Path, embedder: Embedder) -> Iterator[Callable[..., Memory]]:
    """Build a Memory on a fresh SQLite file with a scripted LLM."""
    made: list[Memory] = []

    def make(llm: ScriptedLLM, config: ManagerConfig | None = None, name: str = "m") -> Memory:
        from deltamem.store.sqlite import SQLiteStore

        # scripted replies here are whole operation lists: the "session" strategy's
        # shape (the default "turns" strategy has its own tests, test_manager_turns.py)
        config = config or SESSION

        st = SQLiteStore(tmp_path / f"{name}.db", dim=embedder.dim, embedder_name=embedder.name)
        mem = Memory(llm=llm, embedder=embedder, store=st, config=config)
        made.append(mem)
        return mem

    yield make
    for m in made:
        m.close()


@pytest.fixture
def mem(make_memory: Callable[..., Memory], llm: ScriptedLLM) -> Memory:
    return make_memory(llm)


@pytest.fixture
def session_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's `deltamem` system on the "session" strategy, for runs whose
    scripted LLM answers with whole operation lists."""
    from deltamem.bench.systems.deltamem_system import DeltamemSystem
    from deltamem.bench.systems.factory import SYSTEMS

    monkeypatch.setitem(
        SYSTEMS,
        "deltamem",
        lambda llm, emb, work: DeltamemSystem(llm, emb, work / "deltamem.db", config=SESSION),
    )


@pytest.fixture
def session_manager_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """$DELTAMEM_MANAGER=session, for tests whose fake model (in process or behind an
    OpenAI-compatible server the CLI or service calls) answers with operation lists."""
    monkeypatch.setenv("DELTAMEM_MANAGER", "session")


@pytest.fixture
def records_file(tmp_path: Path) -> Path:
    """Training records (`deltamem train records`) of the tiny HaluMem fixture."""
    from deltamem.train.records import records_from_halumem, write_records

    out = tmp_path / "records.jsonl"
    write_records(
        records_from_halumem(Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"), out
    )
    return out
