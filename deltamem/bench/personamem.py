"""The PersonaMem runner (SPEC §4.4), on the release's files unchanged: a
questions CSV (`questions_32k.csv`, ...) and its shared contexts JSONL
(`shared_contexts_32k.jsonl`, ...).

Several questions share one context, each seeing it up to its
`end_index_in_shared_context`. Per system, per shared context (its own user):
the context is ingested once, in order, and each question is asked as soon as
the context has reached its end index, so no question sees later messages and
no message is added twice. The context is cut into sessions at each system
message (where PersonaMem starts a new conversation), at each question's end
index and every `chunk` messages. Questions are multiple choice (the letter
answerer of `bench/choice.py`); accuracy overall and by question type.

--resume skips what results.jsonl holds; it must be given the same questions
(the cut points depend on them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.choice import ChoiceAnswerer
from deltamem.bench.datasets import personamem as ds
from deltamem.bench.log import RESULTS, ResultLog
from deltamem.bench.metrics import qa
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.runner import (
    Make,
    add_logged,
    each_system,
    finish,
    required,
    search,
    write_run_metrics,
)
from deltamem.bench.systems import MemorySystem
from deltamem.bench.task import Models, RunnerTask, RunSpec
from deltamem.embed import Embedder
from deltamem.llm.base import LLM

if TYPE_CHECKING:
    from deltamem.bench.render import Block

QA_K = 10
CHUNK = 20
METRICS = "metrics.json"


@dataclass
class PersonaMemRun:
    questions: Path
    contexts: Path
    out: Path
    systems: Sequence[str]
    shared_contexts: int | None = None  # the first N shared contexts (of the questions)
    limit: int | None = None  # the first N questions of the CSV
    resume: bool = False
    qa_k: int = QA_K
    chunk: int = CHUNK  # most messages in one session
    progress: Progress | None = None


def by_context(questions: Sequence[ds.PMQuestion]) -> dict[str, list[ds.PMQuestion]]:
    """Questions per shared context (contexts in first-seen order), each list in
    the order the context reaches them."""
    out: dict[str, list[ds.PMQuestion]] = {}
    for q in questions:
        out.setdefault(q.shared_context_id, []).append(q)
    return {k: sorted(v, key=lambda q: q.end_index_in_shared_context) for k, v in out.items()}


def cut_points(raw: list[dict[str, Any]], ends: set[int], chunk: int) -> list[tuple[int, int]]:
    """[start, stop) ranges covering messages 0..max(ends): a new range at each
    system message, after each end index, and every `chunk` messages."""
    if not ends:
        return []
    last = min(max(ends), len(raw) - 1)
    out, start = [], 0
    for i in range(last + 1):
        system = str(raw[i].get("role", "")) == "system"
        if i > start and (system or i - start >= max(chunk, 1)):
            out.append((start, i))
            start = i
        if i in ends:
            out.append((start, i + 1))
            start = i + 1
    if start <= last:
        out.append((start, last + 1))
    return out


def selected(
    run: PersonaMemRun,
) -> tuple[dict[str, list[ds.PMQuestion]], dict[str, list[dict[str, Any]]]]:
    """The run's questions by shared context (--limit, --shared-contexts), and the
    contexts (each question's context checked to be there)."""
    questions = ds.load_questions(run.questions)
    questions = questions[: run.limit] if run.limit is not None else questions
    groups = by_context(questions)
    if run.shared_contexts is not None:
        groups = dict(list(groups.items())[: run.shared_contexts])
    contexts = ds.load_contexts(run.contexts)
    missing = [c for c in groups if c not in contexts]
    if missing:
        raise ValueError(f"shared context {missing[0]} of the questions is not in {run.contexts}")
    return groups, contexts


def context_cuts(
    run: PersonaMemRun, raw: list[dict[str, Any]], qs: Sequence[ds.PMQuestion]
) -> list[tuple[int, int]]:
    """The [start, stop) ranges of a shared context its questions need, one session each."""
    return cut_points(raw, {q.end_index_in_shared_context for q in qs}, run.chunk)


def run_personamem(
    run: PersonaMemRun, *, llm: LLM | None, embedder: Embedder | None, make: Make | None = None
) -> dict[str, Any]:
    groups, contexts = selected(run)
    answerer = ChoiceAnswerer(required(llm, "choosing the answers"))
    run.out.mkdir(parents=True, exist_ok=True)
    n = len(run.systems)
    sessions = sum(len(context_cuts(run, contexts[cid], qs)) for cid, qs in groups.items())
    questions = sum(len(qs) for qs in groups.values())
    declare(run.progress, {"sessions": n * sessions, "questions": n * questions})
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    try:
        for system, fresh in each_system(run.systems, run.out, run.resume, llm, embedder, make):
            for cid, qs in groups.items():
                _context(run, system, log, answerer, cid, contexts[cid], qs, fresh)
    finally:
        log.close()
    return write_metrics(run.out)


def _context(
    run: PersonaMemRun,
    system: MemorySystem,
    log: ResultLog,
    answerer: ChoiceAnswerer,
    cid: str,
    raw: list[dict[str, Any]],
    qs: list[ds.PMQuestion],
    fresh: bool,
) -> None:
    uid = f"pm:{cid}".replace("/", "_")
    prefix = f"{system.name}|{uid}"
    done = f"{prefix}|done"
    cuts = context_cuts(run, raw, qs)
    if log.has(done):
        tick(run.progress, "sessions", len(cuts))
        tick(run.progress, "questions", len(qs))
        return
    if fresh:
        system.reset(uid)
    turn_ids: dict[str, list[str]] = {}
    pending = list(qs)
    for k, (start, stop) in enumerate(cuts):
        bench = ds.range_session(cid, raw, start, stop, session_id=f"c{start}-{stop - 1}")
        turn_ids[bench.session_id] = bench.turn_ids
        fields = {"session": k, "start": start, "stop": stop}
        add_logged(system, log, uid, bench, f"{prefix}|session|{start}-{stop}", fields)
        tick(run.progress, "sessions")  # logged before or not: the session was added
        while pending and pending[0].end_index_in_shared_context < stop:
            _question(run, system, log, answerer, pending.pop(0), uid, prefix)
    for q in pending:  # an end index past the context's end: all of it was seen
        _question(run, system, log, answerer, q, uid, prefix)
    finish(system, log, uid, done)


def _question(
    run: PersonaMemRun,
    system: MemorySystem,
    log: ResultLog,
    answerer: ChoiceAnswerer,
    q: ds.PMQuestion,
    uid: str,
    prefix: str,
) -> None:
    key = f"{prefix}|question|{q.question_id}"
    if log.has(key):
        tick(run.progress, "questions")
        return
    extra = q.model_extra or {}
    rec: dict[str, Any] = {
        "key": key,
        "kind": "question",
        "system": system.name,
        "user": uid,
        "question_id": q.question_id,
        "question_type": q.question_type,
        "persona_id": q.persona_id,
        "topic": extra.get("topic"),
        "shared_context_id": q.shared_context_id,
        "end_index": q.end_index_in_shared_context,
        "question": q.user_question_or_message,
        "choices": q.choices,
        "ground_truth": q.correct_letter,
    }
    found = search(system, uid, q.user_question_or_message, run.qa_k)
    rec |= found.fields()
    rec["prediction"] = None
    asked_at = max((r.timestamp for r in found.found if r.timestamp), default=None)
    t0 = time.perf_counter()
    try:
        hits = as_search_hits(found.found, uid, asked_at or datetime.now(UTC))
        rec["prediction"] = answerer.choose(q.user_question_or_message, q.choices, hits)
    except Exception as exc:
        rec["error"] = rec["error"] or error_text(exc)
    rec["answer_seconds"] = time.perf_counter() - t0
    rec["correct"] = (rec["prediction"] or "").strip().lower() == q.correct_letter
    log.write(rec)
    tick(run.progress, "questions")


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    questions = [r for r in records if r.get("kind") == "question"]
    return {
        "accuracy": qa.accuracy(questions),
        "n": len(questions),
        "by_type": qa.grouped(questions, "question_type"),
        "by_topic": qa.grouped(questions, "topic"),
        "timing": {
            "read_seconds_per_question": qa.mean_of(questions, "search_seconds"),
            "answer_seconds_per_question": qa.mean_of(questions, "answer_seconds"),
        },
        "errors": qa.errors(records),
    }


def write_metrics(out: Path) -> dict[str, Any]:
    return write_run_metrics(
        out, lambda rs: {"benchmark": "personamem", **aggregate(rs), "cost": cost_metrics(rs)}
    )


class PersonaMemTask(RunnerTask):
    """PersonaMem as a `Task` (bench/task.py): `run_personamem` on a PersonaMemRun;
    DATA is the questions CSV, then its shared contexts JSONL."""

    name = "personamem"
    title = "PersonaMem"
    data = ("questions_32k.csv", "shared_contexts_32k.jsonl")
    config = PersonaMemRun
    data_fields = ("questions", "contexts")
    limit_field = "shared_contexts"

    def dataset(self, spec: RunSpec) -> list[list[ds.PMQuestion]]:
        """Per shared context (the unit --limit counts), its questions."""
        groups, _ = selected(self.build(spec))
        return list(groups.values())

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        return run_personamem(
            self.build(spec), llm=models.llm, embedder=models.embedder, make=models.make
        )

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_metrics(out)

    def page(self, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
        from deltamem.bench.report_qa import personamem_page

        return personamem_page(metrics, records)


TASK = PersonaMemTask()
