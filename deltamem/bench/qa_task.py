"""A new benchmark in two methods: `QATask` runs any benchmark shaped as units (a
user's sessions, then questions about them) through one resumable loop. A
subclass writes the dataset loader (`units`: the file as `Unit`s) and the scorer
(`score`: a question's numbers from the prediction and what was retrieved); the
loop, the log, --resume, evidence recall, the metrics (each score's mean, overall
and by `group`), cost and the report page come from here. Register it with one
line in `task.TASKS`, or name it on the command line as `package.module:OBJECT`:

    class TriviaTask(QATask):
        name, title, data = "trivia", "Trivia", ("trivia.json",)

        def units(self, data):
            for row in json.loads(data.read_text()):
                yield Unit(row["user"], [...BenchSession...], [Question(...)])

        def score(self, q, prediction, retrieved):
            return {"exact": None if prediction is None else prediction == q.answer}

The loop per system and unit: reset the user (fresh run), add each session
(logged with its cost), then per question search(question, k), answer with
deltamem's Answerer unless the run is answer-free (--no-answers), and log the
record with `evidence_recall` (share of the question's evidence turn ids that
the retrieved items came from, through their provenance) and the scores.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.datasets import BenchSession
from deltamem.bench.log import RESULTS, ResultLog
from deltamem.bench.metrics import qa
from deltamem.bench.metrics.common import mean
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.render import Block
from deltamem.bench.runner import (
    add_logged,
    each_system,
    finish,
    reached_by_rank,
    required,
    search,
    write_run_metrics,
)
from deltamem.bench.task import Models, Record, RunnerTask, RunSpec

Score = float | bool | None


@dataclass
class Question:
    id: str  # unique within its unit
    text: str
    answer: str | None = None  # the reference, for the scorer
    evidence: Sequence[str] = ()  # dataset turn ids that hold the answer (BenchSession.turn_ids)
    asked_at: datetime | None = None  # default: the last session's time
    fields: dict[str, Any] = field(default_factory=dict)  # logged as they are ("group", ...)


@dataclass
class Unit:
    """One user's history and the questions asked after it."""

    user: str
    sessions: list[BenchSession]
    questions: list[Question]


@dataclass
class QARun:
    data: Path
    out: Path
    systems: Sequence[str]
    limit: int | None = None  # the first N units
    only: Sequence[str] = ()  # these units (by user id)
    resume: bool = False
    qa_k: int = 10
    answer: bool = True
    progress: Progress | None = None


class QATask(RunnerTask):
    """A `Task` from a dataset loader and a scorer; see the module's docstring."""

    config = QARun
    limit_field = "limit"
    group = "group"  # the question field the metrics are also grouped by

    # --- what a benchmark writes -------------------------------------------------------
    def units(self, data: Path) -> Iterable[Unit]:
        """The dataset: the file as units, in order."""
        raise NotImplementedError

    def score(self, q: Question, prediction: str | None, retrieved: list[str]) -> dict[str, Score]:
        """A question's scores (None: not scored, e.g. no prediction in an answer-free
        run). `retrieved`: the texts the system returned, best first."""
        raise NotImplementedError

    # --- the rest is the same for every such benchmark ---------------------------------
    def selected(self, run: QARun) -> list[Unit]:
        units = list(self.units(run.data))
        if run.only:
            units = [u for u in units if u.user in run.only]
            missing = set(run.only) - {u.user for u in units}
            if missing:
                raise ValueError(f"no unit {', '.join(sorted(missing))} in {run.data}")
        return units[: run.limit] if run.limit is not None else units

    def dataset(self, spec: RunSpec) -> list[Unit]:
        return self.selected(self.build(spec))

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        from deltamem.answer import Answerer

        run: QARun = self.build(spec)
        units = self.selected(run)
        answerer = Answerer(required(models.llm, "answering")) if run.answer else None
        run.out.mkdir(parents=True, exist_ok=True)
        n = len(run.systems)
        declare(
            run.progress,
            {
                "sessions": n * sum(len(u.sessions) for u in units),
                "questions": n * sum(len(u.questions) for u in units),
            },
        )
        log = ResultLog(run.out / RESULTS, resume=run.resume)
        try:
            systems = each_system(
                run.systems, run.out, run.resume, models.llm, models.embedder, models.make
            )
            for system, fresh in systems:
                for unit in units:
                    prefix = f"{system.name}|{unit.user}"
                    if log.has(f"{prefix}|done"):
                        tick(run.progress, "sessions", len(unit.sessions))
                        tick(run.progress, "questions", len(unit.questions))
                        continue
                    if fresh:
                        system.reset(unit.user)
                    turn_ids: dict[str, list[str]] = {}
                    last: datetime | None = None
                    for i, bench in enumerate(unit.sessions):
                        turn_ids[bench.session_id] = bench.turn_ids
                        last = bench.timestamp or last
                        key = f"{prefix}|session|{i}"
                        add_logged(system, log, unit.user, bench, key, {"session": i})
                        tick(run.progress, "sessions")  # logged before or not: it was added
                    for q in unit.questions:
                        key = f"{prefix}|question|{q.id}"
                        if not log.has(key):
                            asked_at = q.asked_at or last or datetime.now(UTC)
                            log.write(
                                self._question(
                                    run, system, answerer, q, key, turn_ids, unit.user, asked_at
                                )
                            )
                        tick(run.progress, "questions")
                    finish(system, log, unit.user, f"{prefix}|done")
        finally:
            log.close()
        return self.write_metrics(run.out)

    def _question(
        self,
        run: QARun,
        system: Any,
        answerer: Any,
        q: Question,
        key: str,
        turn_ids: dict[str, list[str]],
        user: str,
        asked_at: datetime,
    ) -> Record:
        rec: Record = {
            "key": key,
            "kind": "question",
            "system": system.name,
            "user": user,
            "question_id": q.id,
            "question": q.text,
            "answer": q.answer,
            "evidence": list(q.evidence),
            **q.fields,
        }
        found = search(system, user, q.text, run.qa_k)
        rec |= found.fields()
        rec["hits"] = [r.as_record() for r in found.found]
        reached = [t for ids in reached_by_rank(found.found, turn_ids) for t in ids]
        rec["reached"] = list(dict.fromkeys(reached))
        rec["evidence_recall"] = qa.found_share(list(q.evidence), reached) if q.evidence else None
        rec["prediction"] = None
        if answerer is not None:
            t0 = time.perf_counter()
            try:
                hits = as_search_hits(found.found, user, asked_at)
                rec["prediction"] = answerer.answer(q.text, hits, asked_at=asked_at).text
            except Exception as exc:  # one failed answer must not end the run
                rec["error"] = rec["error"] or error_text(exc)
            rec["answer_seconds"] = time.perf_counter() - t0
        rec["scores"] = {
            k: (float(v) if isinstance(v, bool) else v)
            for k, v in self.score(q, rec["prediction"], rec["retrieved"]).items()
        }
        return rec

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_run_metrics(out, self.aggregate)

    def aggregate(self, records: Sequence[Record]) -> dict[str, Any]:
        """Each score's mean (and evidence recall's) overall and by `group`."""
        questions = [r for r in records if r.get("kind") == "question"]

        def means(qs: Sequence[Record]) -> dict[str, Any]:
            names = dict.fromkeys(k for q in qs for k in q.get("scores") or {})
            out: dict[str, Any] = {
                k: mean(q["scores"][k] for q in qs if (q.get("scores") or {}).get(k) is not None)
                for k in names
            }
            out["evidence_recall"] = qa.mean_of(qs, "evidence_recall")
            out["n"] = len(qs)
            return out

        groups = dict.fromkeys(str(q.get(self.group)) for q in questions if self.group in q)
        by = {g: means([q for q in questions if str(q.get(self.group)) == g]) for g in groups}
        return {
            "benchmark": self.name,
            **means(questions),
            "errors": qa.errors(records),
            f"by_{self.group}": by,
            "cost": cost_metrics(records),
        }

    def page(self, metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
        from deltamem.bench.report_parts import generic_page

        return generic_page(metrics, records)
