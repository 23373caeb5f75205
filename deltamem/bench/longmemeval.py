"""The LongMemEval runner (SPEC §4.4), on the official instance files unchanged
(`longmemeval_oracle.json`, `_s.json`, `_m.json`).

Per system, per instance (its own user, reset first): the haystack sessions are
added in order with their dates, then search(question, k) and deltamem's
Answerer, asked at `question_date`. Scored per question:

- `f1` (judge-free, always): token F1 against the answer (LoCoMo's
  normalisation); for an abstention question (`_abs` id) 1 when the prediction
  declines ("not known", "you did not mention ..."), else 0;
- `verdict` / `correct` with `--judge`: the judge set's QA verdict against the
  reference answer. Abstention questions are settled in code when the
  prediction abstains; otherwise the judge is told the reference is an
  abstention ("not available from memory: <the file's explanation>"), as
  LongMemEval's own judge asks whether the model declined to answer;
- `session_recall` / `turn_recall`: share of `answer_session_ids` / `has_answer`
  turns among those the retrieved items came from (provenance); None for
  abstention questions, as LongMemEval's own retrieval scores leave them out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem.answer import Answerer
from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.datasets import longmemeval as ds
from deltamem.bench.datasets import safe_time
from deltamem.bench.judges.base import CACHE, JudgeCache
from deltamem.bench.judges.checks import abstains
from deltamem.bench.judges.sets import JudgeSet, make_judges
from deltamem.bench.log import RESULTS, ResultLog
from deltamem.bench.metrics import longmemeval as lme
from deltamem.bench.metrics import qa
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.metrics.locomo import token_f1
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.runner import (
    Make,
    add_logged,
    each_system,
    finish,
    reached_by_rank,
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

QA_K = 20
METRICS = "metrics.json"
ABSTENTION = "The information is not available from memory"


@dataclass
class LongMemEvalRun:
    data: Path
    out: Path
    systems: Sequence[str]
    instances: int | None = None  # the first N instances
    only: Sequence[str] = ()  # question ids; empty: all
    resume: bool = False
    qa_k: int = QA_K
    judge_mode: str = "auto"
    progress: Progress | None = None


def evidence_turns(inst: ds.Instance) -> list[str]:
    """Turn ids ("<session id>:<index>") of the turns marked has_answer."""
    return [
        f"{sid}:{j}"
        for sid, turns in zip(inst.session_ids(), inst.haystack_sessions, strict=True)
        for j, t in enumerate(turns)
        if t.has_answer
    ]


def evidence_texts(inst: ds.Instance) -> list[str]:
    return [t.content for turns in inst.haystack_sessions for t in turns if t.has_answer]


# what LongMemEval's answers decline with, beyond `abstains`: "you did not mention a
# boat", "you never told me", "you haven't shared that"
_DECLINES = re.compile(
    r"\b(?:did not|didn['’]t|never|have not|haven['’]t|has not|hasn['’]t)\s+(?:\w+\s+)?"
    r"(?:mention|said|say|told|tell|shared|share|talked|talk|spoken|speak)\w*\b",
    re.IGNORECASE,
)


def declines(prediction: str) -> bool:
    """The answer says the question cannot be answered from what it knows."""
    return abstains(prediction) or bool(_DECLINES.search(prediction))


def answer_f1(prediction: str, inst: ds.Instance) -> float:
    if inst.abstention:
        return 1.0 if declines(prediction) else 0.0
    return token_f1(prediction, inst.answer)


def judge_answer(judges: JudgeSet, inst: ds.Instance, prediction: str) -> dict[str, Any]:
    """The judge set's QA verdict; abstention questions by LongMemEval's rule."""
    if inst.abstention:
        if declines(prediction):
            return {"verdict": "correct", "reason": "abstention question, answer abstains (code)"}
        reference = f"{ABSTENTION}: {inst.answer}".strip()
        return judges.qa(inst.question, reference, [], prediction)
    return judges.qa(inst.question, inst.answer, evidence_texts(inst), prediction)


def select(items: Sequence[ds.Instance], run: LongMemEvalRun) -> list[ds.Instance]:
    out = [i for i in items if i.question_id in run.only] if run.only else list(items)
    missing = set(run.only) - {i.question_id for i in out}
    if missing:
        raise ValueError(f"no question {', '.join(sorted(missing))} in {run.data}")
    return out[: run.instances] if run.instances is not None else out


def run_longmemeval(
    run: LongMemEvalRun,
    *,
    llm: LLM | None,
    embedder: Embedder | None,
    judge: LLM | None = None,
    make: Make | None = None,
) -> dict[str, Any]:
    items = select(ds.load(run.data), run)
    answerer = Answerer(required(llm, "answering"))
    run.out.mkdir(parents=True, exist_ok=True)
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    judges = make_judges(judge, JudgeCache(run.out / CACHE), run.judge_mode) if judge else None
    n = len(run.systems)
    sessions = sum(len(i.haystack_sessions) for i in items)
    declare(run.progress, {"sessions": n * sessions, "questions": n * len(items)})
    try:
        for system, fresh in each_system(run.systems, run.out, run.resume, llm, embedder, make):
            for inst in items:
                _instance(run, system, log, answerer, judges, inst, fresh)
    finally:
        log.close()
    return write_metrics(run.out)


def _instance(
    run: LongMemEvalRun,
    system: MemorySystem,
    log: ResultLog,
    answerer: Answerer,
    judges: JudgeSet | None,
    inst: ds.Instance,
    fresh: bool,
) -> None:
    uid = inst.question_id.replace("/", "_")
    prefix = f"{system.name}|{uid}"
    done = f"{prefix}|done"
    if log.has(done):
        tick(run.progress, "sessions", len(inst.haystack_sessions))
        tick(run.progress, "questions")
        return
    if fresh:
        system.reset(uid)
    turn_ids: dict[str, list[str]] = {}
    last: datetime | None = None
    for k, bench in enumerate(inst.sessions()):
        turn_ids[bench.session_id] = bench.turn_ids
        last = bench.timestamp or last
        add_logged(system, log, uid, bench, f"{prefix}|session|{k}", {"session": k})
        tick(run.progress, "sessions")  # logged before or not: the session was added
    key = f"{prefix}|question"
    if not log.has(key):
        asked_at = safe_time(inst.question_date) or last or datetime.now(UTC)
        log.write(_question(run, system, answerer, judges, inst, turn_ids, uid, key, asked_at))
    tick(run.progress, "questions")
    finish(system, log, uid, done)


def _question(
    run: LongMemEvalRun,
    system: MemorySystem,
    answerer: Answerer,
    judges: JudgeSet | None,
    inst: ds.Instance,
    turn_ids: dict[str, list[str]],
    uid: str,
    key: str,
    asked_at: datetime,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "key": key,
        "kind": "question",
        "system": system.name,
        "user": uid,
        "question_id": inst.question_id,
        "question_type": inst.question_type,
        "abstention": inst.abstention,
        "question": inst.question,
        "answer": inst.answer,
        "question_date": inst.question_date,
        "answer_session_ids": inst.answer_session_ids,
        "evidence_turns": evidence_turns(inst),
    }
    found = search(system, uid, inst.question, run.qa_k)
    rec |= found.fields()
    sessions = [r.session_id for r in found.found if r.session_id]
    turns = [t for ids in reached_by_rank(found.found, turn_ids) for t in ids]
    rec["reached_sessions"] = list(dict.fromkeys(sessions))
    rec["reached_turns"] = list(dict.fromkeys(turns))
    # abstention questions are left out of recall, as in LongMemEval's retrieval scores
    scored = not inst.abstention
    rec["session_recall"] = qa.found_share(inst.answer_session_ids, sessions) if scored else None
    rec["turn_recall"] = qa.found_share(rec["evidence_turns"], turns) if scored else None
    prediction = ""
    t0 = time.perf_counter()
    try:
        hits = as_search_hits(found.found, uid, asked_at)
        prediction = answerer.answer(inst.question, hits, asked_at=asked_at).text
    except Exception as exc:
        rec["error"] = rec["error"] or error_text(exc)
    rec["answer_seconds"] = time.perf_counter() - t0
    rec["prediction"] = prediction
    rec["f1"] = answer_f1(prediction, inst)
    rec["verdict"] = rec["correct"] = None
    if judges is not None and not rec["error"]:
        try:
            reply = judge_answer(judges, inst, prediction)
            rec["verdict"] = str(reply.get("verdict", "")).lower() or None
            rec["judge_reason"] = reply.get("reason")
            rec["correct"] = rec["verdict"] == "correct"
        except Exception as exc:
            rec["error"] = f"judge: {error_text(exc)}"
    return rec


def write_metrics(out: Path) -> dict[str, Any]:
    return write_run_metrics(
        out,
        lambda rs: {"benchmark": "longmemeval", **lme.aggregate(rs), "cost": cost_metrics(rs)},
    )


class LongMemEvalTask(RunnerTask):
    """LongMemEval as a `Task` (bench/task.py): `run_longmemeval` on a LongMemEvalRun."""

    name = "longmemeval"
    title = "LongMemEval"
    data = ("longmemeval_s.json",)
    config = LongMemEvalRun
    limit_field = "instances"

    def dataset(self, spec: RunSpec) -> list[ds.Instance]:
        run = self.build(spec)
        return select(ds.load(run.data), run)

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        return run_longmemeval(
            self.build(spec),
            llm=models.llm,
            embedder=models.embedder,
            judge=models.judge,
            make=models.make,
        )

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_metrics(out)

    def page(self, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
        from deltamem.bench.report_qa import longmemeval_page

        return longmemeval_page(metrics, records)


TASK = LongMemEvalTask()
