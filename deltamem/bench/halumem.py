"""The HaluMem runner (SPEC §4.1).

Per system, per user, sessions in order: add the session; fetch the memories it
produced; for each gold point with is_update "True" and original memories,
search(memory_content, 10); for each question, search(question, 20) and answer
with deltamem's Answerer on the system's LLM. Every evaluated item becomes one
record in OUT/results.jsonl as soon as it exists (see `deltamem.bench.log`).

Judge-free numbers are computed on the spot: the memory-state distance between
a session's extracted memories and its non-distractor gold points (state_f1),
whether an update probe retrieved the updated fact, and how much of a
question's evidence was retrieved (both by embedding cosine ≥ τ). LLM judges,
when asked for, run afterwards over the records (`deltamem.bench.judges`).

Resume: a system's memory is rebuilt by adding the user's sessions again
(deltamem answers a session it has already applied from its log, without the
LLM; raw-turn baselines only re-embed), and every item whose key is in the log
is skipped. Users already finished are skipped whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from deltamem.answer import Answerer
from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.datasets import BenchSession
from deltamem.bench.datasets import halumem as ds
from deltamem.bench.log import RESULTS, ResultLog, judged_records, write_usage
from deltamem.bench.metrics import halumem as hm
from deltamem.bench.metrics.common import mean
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.metrics.coverage import evidence_coverage
from deltamem.bench.metrics.locomo import token_f1
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.report import write_report_safely
from deltamem.bench.runner import each_system, required
from deltamem.bench.softmatch import best_similarity, covered
from deltamem.bench.systems import MemorySystem, Retrieved
from deltamem.bench.systems.base import SESSION_COST_KEYS
from deltamem.bench.task import Models, RunnerTask, RunSpec, TaskError
from deltamem.embed import Embedder
from deltamem.llm.base import LLM
from deltamem.train.distance import DEFAULT_TAU, state_distance

if TYPE_CHECKING:
    from deltamem.bench.render import Block

UPDATE_K = 10
QA_K = 20
METRICS = "metrics.json"


def session_state(
    memories: list[str], gold: list[str], embedder: Embedder, tau: float = DEFAULT_TAU
) -> dict[str, float]:
    """What a session record keeps of the state distance between the memories a
    session produced and its non-distractor gold points (`bench rescore` computes it
    again from the same two lists)."""
    dist = state_distance(memories, gold, embed=embedder.embed, tau=tau)
    return {
        "r_trans": dist.r_trans,
        "precision": dist.precision,
        "recall": dist.recall,
        "dist_plus": dist.dist_plus,
        "dist_minus": dist.dist_minus,
        "pairs": len(dist.pairs),
    }


@dataclass
class HaluMemRun:
    data: Path
    out: Path
    systems: Sequence[str]
    users: int | None = None
    sessions: int | None = None
    resume: bool = False
    tau: float = DEFAULT_TAU
    update_k: int = UPDATE_K
    qa_k: int = QA_K
    # False: questions get retrieval and evidence recall only, no answer call (the
    # judge-free loop for iterating on extraction; the QA judge skips them)
    answer: bool = True
    progress: Progress | None = None


class _UserRun:
    """One system on one user: the per-session procedure."""

    def __init__(
        self,
        run: HaluMemRun,
        system: MemorySystem,
        log: ResultLog,
        embedder: Embedder,
        answerer: Answerer | None,
        user: ds.User,
    ) -> None:
        self.run, self.system, self.log = run, system, log
        self.embedder, self.answerer, self.user = embedder, answerer, user
        self.uid = user.uuid

    def key(self, *parts: object) -> str:
        return "|".join([self.system.name, self.uid, *map(str, parts)])

    def base(self, sidx: int, kind: str) -> dict[str, Any]:
        return {"system": self.system.name, "user": self.uid, "session": sidx, "kind": kind}

    def tick(self, what: str) -> None:
        tick(self.run.progress, what)

    def session(self, sidx: int, session: ds.Session) -> None:
        bench = ds.to_bench_session(session, sidx, self.user.name)
        skey = self.key(sidx, "session")
        done = self.log.has(skey)
        before = self.system.cost.as_dict()
        error = None
        if bench.messages:
            try:
                self.system.add_session(self.uid, bench.session_id, bench.messages, bench.timestamp)
            except Exception as exc:  # one failed session must not end the run
                error = error_text(exc)
        if done:
            self.tick("sessions")  # added again to rebuild the memory, not logged twice
            if session.evaluated:
                self._evaluate(sidx, session, bench)
            return
        after = self.system.cost.as_dict()
        cost = {k: after[k] - before[k] for k in SESSION_COST_KEYS}
        rec = self.base(sidx, "session") | {
            "key": skey,
            "session_id": bench.session_id,
            "filler": not session.evaluated,
            "messages": len(bench.messages),
            "cost": cost,
            "error": error,
        }
        if session.evaluated:
            memories: list[str] = []
            try:
                memories = self.system.get_session_memories(self.uid, bench.session_id)
            except Exception as exc:
                rec["error"] = rec["error"] or error_text(exc)
            gold = [p.memory_content for p in session.memory_points if not p.is_distractor]
            rec |= {
                "memories": memories,
                "gold": gold,
                "state": session_state(memories, gold, self.embedder, self.run.tau),
            }
            self._items_for_judges(sidx, session, memories)
        self.log.write(rec)
        self.tick("sessions")
        if session.evaluated:
            self._evaluate(sidx, session, bench)

    def _items_for_judges(self, sidx: int, session: ds.Session, memories: list[str]) -> None:
        """Records the integrity and accuracy judges will score (score left None)."""
        for i, p in enumerate(session.memory_points):
            if p.is_update_target:
                continue
            self.log.write(
                self.base(sidx, "point")
                | {
                    "key": self.key(sidx, "point", i),
                    "memory_content": p.memory_content,
                    "memory_type": p.memory_type,
                    "memory_source": p.memory_source,
                    "importance": p.importance,
                    "distractor": p.is_distractor,
                    "score": None,
                }
            )
        raw = self.system.stores_raw_turns
        for j, m in enumerate(memories):
            self.log.write(
                self.base(sidx, "extracted")
                | {
                    "key": self.key(sidx, "extracted", j),
                    "memory": m,
                    "score": None,
                    "included": None,
                    # accuracy/precision are left None (not 0) for raw-turn stores
                    "not_judged": "raw turn, not an extracted memory" if raw else None,
                }
            )

    def _evaluate(self, sidx: int, session: ds.Session, bench: BenchSession) -> None:
        asked_at = ds.safe_time(session.end_time) or bench.timestamp or datetime.now(UTC)
        for i, p in enumerate(session.memory_points):
            if p.is_update_target:
                if not self.log.has(self.key(sidx, "update", i)):
                    self._update_probe(sidx, i, p)
                self.tick("updates")
        for q_i, q in enumerate(session.questions):
            if not self.log.has(self.key(sidx, "question", q_i)):
                self._question(sidx, q_i, q, asked_at)
            self.tick("questions")

    def _update_probe(self, sidx: int, i: int, p: ds.MemoryPoint) -> None:
        rec = self.base(sidx, "update") | {
            "key": self.key(sidx, "update", i),
            "memory_content": p.memory_content,
            "original_memories": p.original_memories,
            "memory_type": p.memory_type,
            "verdict": None,
            "error": None,
        }
        found: list[Retrieved] = []
        t0 = time.perf_counter()
        try:
            found = self.system.search_retrieved(self.uid, p.memory_content, self.run.update_k)
        except Exception as exc:
            rec["error"] = error_text(exc)
        rec["search_seconds"] = time.perf_counter() - t0
        rec["retrieved"] = [r.text for r in found]
        best = best_similarity(self.embedder, [p.memory_content], rec["retrieved"])
        rec["best_similarity"] = best[0]
        rec["retrieved_hit"] = best[0] >= self.run.tau
        self.log.write(rec)

    def _question(self, sidx: int, q_i: int, q: ds.Question, asked_at: datetime) -> None:
        rec = self.base(sidx, "question") | {
            "key": self.key(sidx, "question", q_i),
            "question": q.question,
            "answer": q.answer,
            "question_type": q.question_type,
            "difficulty": q.difficulty,
            "evidence": [e.memory_content for e in q.evidence],
            "verdict": None,
            "error": None,
        }
        found: list[Retrieved] = []
        t0 = time.perf_counter()
        try:
            found = self.system.search_retrieved(self.uid, q.question, self.run.qa_k)
        except Exception as exc:
            rec["error"] = error_text(exc)
        rec["search_seconds"] = time.perf_counter() - t0
        rec["retrieved"] = [r.text for r in found]
        # enough to answer again from the log with another answerer (bench answer)
        rec["hits"] = [r.as_record() for r in found]
        rec["asked_at"] = asked_at.isoformat()
        rec["evidence_recall"] = covered(
            self.embedder, rec["evidence"], rec["retrieved"], self.run.tau
        )
        rec["evidence_coverage"] = evidence_coverage(
            rec["evidence"], rec["retrieved"], self.user.name
        )
        rec["prediction"] = None
        if self.answerer is None:
            rec["not_answered"] = "run without answers"
        else:
            t1 = time.perf_counter()
            try:
                ans = self.answerer.answer(
                    q.question, as_search_hits(found, self.uid, asked_at), asked_at=asked_at
                )
                rec["prediction"] = ans.text
                rec["answer_f1"] = token_f1(ans.text, str(q.answer))
            except Exception as exc:
                rec["error"] = rec["error"] or error_text(exc)
            rec["answer_seconds"] = time.perf_counter() - t1
        self.log.write(rec)


def user_sessions(user: ds.User, run: HaluMemRun) -> list[ds.Session]:
    """The user's sessions the run evaluates (--sessions: the first N)."""
    return user.sessions[: run.sessions] if run.sessions else user.sessions


def bar_counts(sessions: Sequence[ds.Session]) -> dict[str, int]:
    """What one system goes through for a user's sessions, per progress bar: every
    session, and the update probes and questions of the evaluated ones."""
    evaluated = [s for s in sessions if s.evaluated]
    return {
        "sessions": len(sessions),
        "updates": sum(p.is_update_target for s in evaluated for p in s.memory_points),
        "questions": sum(len(s.questions) for s in evaluated),
    }


def bar_totals(users: Iterable[ds.User], run: HaluMemRun) -> dict[str, int]:
    """Each bar's total over the users, for all the run's systems."""
    totals = dict.fromkeys(("sessions", "updates", "questions"), 0)
    for user in users:
        for what, n in bar_counts(user_sessions(user, run)).items():
            totals[what] += n
    return {what: n * len(run.systems) for what, n in totals.items()}


def _user_done_key(system: str, uid: str, n_sessions: int) -> str:
    """Marks a user finished over its first n sessions (a later run with a larger
    --sessions limit is not fooled by it)."""
    return f"{system}|{uid}|done|{n_sessions}"


def run_halumem(
    run: HaluMemRun,
    *,
    llm: LLM | None,
    embedder: Embedder | None,
    make: Callable[[str, Path], MemorySystem] | None = None,
) -> dict[str, Any]:
    """Run every system over the data, writing results.jsonl, then metrics.json.

    `make(name, workdir)` builds a system (default: the registry in
    `deltamem.bench.systems` with this `llm` and `embedder`)."""
    emb = required(embedder, "HaluMem's judge-free scores (state F1, evidence recall)")
    answerer = (
        Answerer(required(llm, "answering (--no-answers does without)")) if run.answer else None
    )
    run.out.mkdir(parents=True, exist_ok=True)
    # a pass over the file of its own for the totals: the users are streamed, not kept
    declare(run.progress, bar_totals(ds.iter_users(run.data, limit=run.users), run))
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    try:
        for system, fresh in each_system(run.systems, run.out, run.resume, llm, emb, make):
            for user in ds.iter_users(run.data, limit=run.users):
                sessions = user_sessions(user, run)
                if log.has(_user_done_key(system.name, user.uuid, len(sessions))):
                    for what, n in bar_counts(sessions).items():
                        tick(run.progress, what, n)
                    continue
                if fresh:
                    system.reset(user.uuid)
                ur = _UserRun(run, system, log, emb, answerer, user)
                for sidx, session in enumerate(sessions):
                    ur.session(sidx, session)
                log.write(
                    {
                        "key": _user_done_key(system.name, user.uuid, len(sessions)),
                        "system": system.name,
                        "user": user.uuid,
                        "kind": "user_done",
                    }
                )
    finally:
        log.close()
    return write_metrics(run.out)


def retrieval_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Judge-free read-side numbers: did the update probe retrieve the updated fact,
    and how much of each question's evidence was retrieved."""
    ups = [r for r in records if r.get("kind") == "update"]
    qs = [r for r in records if r.get("kind") == "question"]
    return {
        "update_hit_at_10": mean(float(r["retrieved_hit"]) for r in ups),
        "qa_evidence_recall_at_20": mean(
            r["evidence_recall"] for r in qs if r.get("evidence_recall") is not None
        ),
        # judge-free, for facts and raw turns alike (metrics/coverage.py)
        "qa_evidence_coverage_at_20": mean(
            r["evidence_coverage"] for r in qs if r.get("evidence_coverage") is not None
        ),
        "qa_answer_f1": mean(r["answer_f1"] for r in qs if r.get("answer_f1") is not None),
        "errors": sum(1 for r in records if r.get("error")),
    }


def metrics_for(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    agg = hm.aggregate(records)
    return {
        "extraction": agg["extraction"],
        "update": agg["update"],
        "qa": agg["qa"],
        "qa_by_session": agg["qa_by_session"],
        "retrieval": retrieval_metrics(records),
        "cost": cost_metrics(records),
    }


def write_metrics(out: Path) -> dict[str, Any]:
    """metrics.json from results.jsonl (and judgments.jsonl where judges ran)."""
    records = judged_records(out)
    systems = list(dict.fromkeys(str(r["system"]) for r in records if "system" in r))
    metrics = {s: metrics_for([r for r in records if r.get("system") == s]) for s in systems}
    (out / METRICS).write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    write_usage(out)
    write_report_safely(out)
    return metrics


class HaluMemTask(RunnerTask):
    """HaluMem as a `Task` (bench/task.py): `run_halumem`, then the judges named by
    the `judges` option when a judge model is given."""

    name = "halumem"
    title = "HaluMem"
    data = ("HaluMem.jsonl",)
    config = HaluMemRun
    limit_field = "users"
    extra_options: ClassVar[dict[str, Any]] = {"judges": "integrity,accuracy,update,qa"}

    def dataset(self, spec: RunSpec) -> list[ds.User]:
        run = self.build(spec)
        return list(ds.iter_users(run.data, limit=run.users))

    def kinds(self, spec: RunSpec) -> frozenset[str]:
        """The judges the `judges` option names (checked)."""
        from deltamem.bench.judges.halumem import JUDGES

        given = str(self.option(spec, "judges"))
        kinds = frozenset(k.strip() for k in given.split(",") if k.strip())
        if not kinds or kinds - JUDGES:
            raise TaskError(f"unknown judge in {given!r}; choose from {', '.join(sorted(JUDGES))}")
        return kinds

    def check(self, spec: RunSpec) -> None:
        self.build(spec)
        self.kinds(spec)

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        run = self.build(spec)
        kinds = self.kinds(spec)  # checked before the run, not after it
        metrics = run_halumem(run, llm=models.llm, embedder=models.embedder, make=models.make)
        if models.judge is None:
            return metrics
        from deltamem.bench.judges.halumem import judge_run

        judge_run(
            run.out,
            run.data,
            models.judge,
            progress=run.progress,
            kinds=kinds,
            mode=spec.judge_mode,
        )
        return write_metrics(run.out)

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_metrics(out)

    def page(self, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
        from deltamem.bench.report_halumem import halumem_page

        return halumem_page(metrics, records)


TASK = HaluMemTask()
