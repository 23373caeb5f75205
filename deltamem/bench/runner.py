"""Glue the MemBench, LongMemEval and PersonaMem runners share: building each
system in turn, adding a session with its logged record and cost, a timed search
that never raises, and mapping retrieved items back to dataset turn ids through
their provenance (session id + message indices)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from deltamem.bench.answering import error_text
from deltamem.bench.datasets import BenchSession
from deltamem.bench.log import RESULTS, ResultLog, read_records, write_usage
from deltamem.bench.report import METRICS, write_report_safely
from deltamem.bench.systems import MemorySystem, Retrieved, make_system
from deltamem.bench.systems.base import SESSION_COST_KEYS, starts_empty
from deltamem.bench.systems.turns import TurnSystem
from deltamem.bench.task import TaskError
from deltamem.embed import Embedder
from deltamem.llm.base import LLM

Make = Callable[[str, Path], MemorySystem]
T = TypeVar("T")


def required(model: T | None, what: str) -> T:
    """A model the run cannot do without (`what` needs it), or a clear error."""
    if model is None:
        raise TaskError(f"{what} needs a model, and none was given")
    return model


def each_system(
    names: Sequence[str],
    out: Path,
    resume: bool,
    llm: LLM | None,
    embedder: Embedder | None,
    make: Make | None = None,
) -> Iterator[tuple[MemorySystem, bool]]:
    """Each system in turn (closed after use) and whether its users must be reset
    before they are filled: on a fresh run, unless the system reads the bank of a
    system that filled it earlier in this run (`bank_of`)."""
    for i, name in enumerate(names):
        work = out / "systems" / name
        if not resume and work.exists():
            shutil.rmtree(work)
        if make is not None:
            system = make(name, work)
        else:
            what = f"system {name}"
            system = make_system(name, required(llm, what), required(embedder, what), work)
        try:
            yield system, not resume and starts_empty(system, names[:i])
        finally:
            system.close()


def add_logged(
    system: MemorySystem,
    log: ResultLog,
    uid: str,
    bench: BenchSession,
    key: str,
    fields: dict[str, Any],
) -> bool:
    """Add one session and log its record (cost, error). A session whose record is
    already logged (a resumed run) is added again to rebuild the memory (deltamem
    replays it from its log, turn baselines re-embed) but not logged twice.
    Returns whether a record was written."""
    logged = log.has(key)
    before = system.cost.as_dict()
    error = None
    if bench.messages:
        try:
            system.add_session(uid, bench.session_id, bench.messages, bench.timestamp)
        except Exception as exc:  # one failed session must not end the run
            error = error_text(exc)
    if logged:
        return False
    after = system.cost.as_dict()
    log.write(
        {
            "key": key,
            "kind": "session",
            "system": system.name,
            "user": uid,
            "session_id": bench.session_id,
            **fields,
            "messages": len(bench.messages),
            "error": error,
            "cost": {k: after[k] - before[k] for k in SESSION_COST_KEYS},
        }
    )
    return True


def finish(system: MemorySystem, log: ResultLog, uid: str, done: str) -> None:
    """Mark a user finished; a raw-turn baseline's in-process copy of it is dropped
    (no later item reads it, and LongMemEval_M or PersonaMem-1M users would pile up
    in memory). Stores on disk are kept (`deltamem-facts` reads deltamem's bank)."""
    log.write({"key": done, "kind": "user_done", "system": system.name, "user": uid})
    if isinstance(system, TurnSystem):
        system.reset(uid)


@dataclass
class Search:
    found: list[Retrieved]
    seconds: float
    error: str | None

    def fields(self) -> dict[str, Any]:
        """What a question's record keeps of the search."""
        return {
            "error": self.error,
            "search_seconds": self.seconds,
            "retrieved": [r.text for r in self.found],
        }


def search(system: MemorySystem, uid: str, query: str, k: int) -> Search:
    t0 = time.perf_counter()
    try:
        found, error = system.search_retrieved(uid, query, k), None
    except Exception as exc:
        found, error = [], error_text(exc)
    return Search(found, time.perf_counter() - t0, error)


def reached_by_rank(found: Sequence[Retrieved], turn_ids: dict[str, list[str]]) -> list[list[str]]:
    """For each retrieved item, in rank order, the dataset turn ids it was derived
    from (empty for an item without provenance, e.g. Mem0's)."""
    out = []
    for r in found:
        ids = turn_ids.get(r.session_id or "", [])
        out.append(list(dict.fromkeys(ids[i] for i in r.turns if 0 <= i < len(ids))))
    return out


def write_run_metrics(
    out: Path, per_system: Callable[[list[dict[str, Any]]], dict[str, Any]]
) -> dict[str, Any]:
    """OUT/metrics.json from OUT/results.jsonl: `per_system(records)` for each
    system's records, in the order the systems first appear; then the usage summary
    and the HTML report."""
    records = list(read_records(out / RESULTS))
    systems = list(dict.fromkeys(str(r["system"]) for r in records if "system" in r))
    metrics = {s: per_system([r for r in records if r.get("system") == s]) for s in systems}
    (out / METRICS).write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    write_usage(out)
    write_report_safely(out)
    return metrics
