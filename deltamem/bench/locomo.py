"""The LoCoMo runner (SPEC §4.2).

Per system, per conversation: add the sessions in order (speaker_a as "user",
speaker_b as "assistant", both named; see `datasets.locomo`); then for each QA
search(question, 20), answer with deltamem's Answerer, and score: token F1 by
category, BLEU-1, evidence recall (share of the evidence turns that the
retrieved memories were derived from, through their provenance), and an LLM
judge's CORRECT / WRONG when a judge is given. One record per QA in
OUT/results.jsonl as it is produced; --resume skips what is there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem.answer import Answerer
from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.datasets import locomo as ds
from deltamem.bench.log import RESULTS, ResultLog, read_records
from deltamem.bench.metrics import locomo as lm
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.runner import each_system, required, write_run_metrics
from deltamem.bench.systems import MemorySystem, Retrieved
from deltamem.bench.systems.base import SESSION_COST_KEYS
from deltamem.bench.task import Models, RunnerTask, RunSpec
from deltamem.embed import Embedder
from deltamem.llm.base import LLM

if TYPE_CHECKING:
    from deltamem.bench.render import Block

QA_K = 20
METRICS = "metrics.json"


@dataclass
class LocomoRun:
    data: Path
    out: Path
    systems: Sequence[str]
    conversations: int | None = None
    only: Sequence[str] = ()  # sample ids (e.g. "conv-30"); empty: all
    sessions: int | None = None
    resume: bool = False
    qa_k: int = QA_K
    both_as_user: bool = False  # give speaker_b role "user" too (see datasets.locomo)
    judge_mode: str = "auto"  # rubric or decomposed judges (judges.sets.make_judges)
    # False: questions get retrieval and evidence recall only, no answer call (the
    # write pass; `deltamem bench answer` answers from the logged hits later)
    answer: bool = True
    progress: Progress | None = None


def reached_turns(found: Sequence[Retrieved], turn_ids: dict[str, list[str]]) -> list[str]:
    """Dataset turn ids (dia_id) the retrieved items were derived from."""
    out: list[str] = []
    for r in found:
        ids = turn_ids.get(r.session_id or "", [])
        out.extend(ids[i] for i in r.turns if 0 <= i < len(ids))
    return list(dict.fromkeys(out))


def conversations(run: LocomoRun) -> list[ds.LocomoConversation]:
    """The conversations a run evaluates (--conversations, --conversation)."""
    convs = ds.load(run.data, limit=run.conversations)
    if run.only:
        convs = [c for c in convs if c.sample_id in run.only]
        missing = set(run.only) - {c.sample_id for c in convs}
        if missing:
            raise ValueError(f"no conversation {', '.join(sorted(missing))} in {run.data}")
    return convs


def conv_sessions(run: LocomoRun, conv: ds.LocomoConversation) -> list[ds.LocomoSession]:
    """The conversation's sessions the run adds (--sessions: the first N)."""
    return conv.sessions[: run.sessions] if run.sessions else conv.sessions


def asked(
    run: LocomoRun, conv: ds.LocomoConversation, sessions: Sequence[ds.LocomoSession]
) -> list[tuple[int, ds.LocomoQA]]:
    """The conversation's questions the run asks, with their index: all of them, or
    with --sessions those whose evidence was all added."""
    if not run.sessions:
        return list(enumerate(conv.qa))
    seen = {f"D{s.index}:" for s in sessions}
    return [
        (i, qa)
        for i, qa in enumerate(conv.qa)
        if all(any(e.startswith(p) for p in seen) for e in qa.evidence)
    ]


def run_locomo(
    run: LocomoRun,
    *,
    llm: LLM | None,
    embedder: Embedder | None,
    judge: LLM | None = None,
    make: Callable[[str, Path], MemorySystem] | None = None,
) -> dict[str, Any]:
    convs = conversations(run)
    n = len(run.systems)
    declare(
        run.progress,
        {
            "sessions": n * sum(len(conv_sessions(run, c)) for c in convs),
            "questions": n * sum(len(asked(run, c, conv_sessions(run, c))) for c in convs),
        },
    )
    run.out.mkdir(parents=True, exist_ok=True)
    answerer = (
        Answerer(required(llm, "answering (--no-answers does without)")) if run.answer else None
    )
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    qa_judge = None
    if judge is not None and run.answer:
        from deltamem.bench.judges.locomo import LocomoJudge

        qa_judge = LocomoJudge(judge, run.out, run.judge_mode)
    try:
        for system, fresh in each_system(run.systems, run.out, run.resume, llm, embedder, make):
            for conv in convs:
                _conversation(run, system, log, answerer, qa_judge, conv, fresh)
    finally:
        log.close()
    return write_metrics(run.out)


def _conversation(
    run: LocomoRun,
    system: MemorySystem,
    log: ResultLog,
    answerer: Answerer | None,
    qa_judge: Any,
    conv: ds.LocomoConversation,
    fresh: bool,
) -> None:
    uid = conv.sample_id
    prefix = f"{system.name}|{uid}"
    sessions = conv_sessions(run, conv)
    questions = asked(run, conv, sessions)
    done = f"{prefix}|done|{len(sessions)}"
    if log.has(done):
        tick(run.progress, "sessions", len(sessions))
        tick(run.progress, "questions", len(questions))
        return
    if fresh:
        system.reset(uid)
    turn_ids: dict[str, list[str]] = {}
    last: datetime | None = None
    for s in sessions:
        bench = ds.to_bench_session(conv, s, run.both_as_user)
        turn_ids[bench.session_id] = bench.turn_ids
        last = bench.timestamp or last
        before = system.cost.as_dict()
        error = None
        if bench.messages:
            try:
                system.add_session(uid, bench.session_id, bench.messages, bench.timestamp)
            except Exception as exc:
                error = error_text(exc)
        after = system.cost.as_dict()
        log.write(
            {
                "key": f"{prefix}|session|{s.index}",
                "kind": "session",
                "system": system.name,
                "user": uid,
                "session": s.index,
                "messages": len(bench.messages),
                "error": error,
                "cost": {k: after[k] - before[k] for k in SESSION_COST_KEYS},
            }
        )
        tick(run.progress, "sessions")
    asked_at = last or datetime.now(UTC)
    for i, qa in questions:
        key = f"{prefix}|qa|{i}"
        if log.has(key):
            tick(run.progress, "questions")
            continue
        rec: dict[str, Any] = {
            "key": key,
            "kind": "question",
            "system": system.name,
            "user": uid,
            "question": qa.question,
            "answer": qa.answer,
            "category": qa.category,
            "evidence": qa.evidence,
            "error": None,
        }
        found: list[Retrieved] = []
        t0 = time.perf_counter()
        try:
            found = system.search_retrieved(uid, qa.question, run.qa_k)
        except Exception as exc:
            rec["error"] = error_text(exc)
        rec["search_seconds"] = time.perf_counter() - t0
        rec["retrieved"] = [r.text for r in found]
        rec["hits"] = [r.as_record() for r in found]  # to answer again (bench answer)
        rec["asked_at"] = asked_at.isoformat()
        reached = reached_turns(found, turn_ids)
        rec["reached"] = reached
        rec["evidence_recall"] = lm.evidence_recall(qa.evidence, reached)
        if answerer is None:
            rec.update(prediction=None, f1=None, bleu1=None, judge=None)
            rec["not_answered"] = "run without answers"
            log.write(rec)
            tick(run.progress, "questions")
            continue
        prediction = ""
        try:
            prediction = answerer.answer(
                qa.question, as_search_hits(found, uid, asked_at), asked_at=asked_at
            ).text
        except Exception as exc:
            rec["error"] = rec["error"] or error_text(exc)
        rec["prediction"] = prediction
        rec["f1"] = lm.answer_f1(prediction, qa.answer, qa.category)
        rec["bleu1"] = (
            None
            if qa.category == 5
            else lm.bleu1(prediction, lm.gold_for(qa.category, qa.answer or ""))
        )
        rec["judge"] = None
        if qa_judge is not None and qa.category != 5 and not rec["error"]:
            rec["judge"] = qa_judge.correct(qa.question, qa.answer or "", prediction)
        log.write(rec)
        tick(run.progress, "questions")
    log.write({"key": done, "kind": "user_done", "system": system.name, "user": uid})


def judge_answers(
    out: Path,
    judge: LLM,
    mode: str = "auto",
    progress: Progress | None = None,
) -> int:
    """Judge OUT's answered questions that have no verdict yet (a run answered
    again with `bench answer`); verdicts are cached, so an interrupted call loses
    nothing. Returns how many were judged."""
    from deltamem.bench.judges.locomo import LocomoJudge

    path = out / RESULTS
    records = list(read_records(path))
    qa_judge = LocomoJudge(judge, out, mode)
    todo = [
        rec
        for rec in records
        if rec.get("kind") == "question"
        and rec.get("category") != 5
        and rec.get("judge") is None
        and rec.get("prediction") is not None
        and not rec.get("error")
    ]
    declare(progress, {"judged": len(todo)})
    for rec in todo:
        rec["judge"] = qa_judge.correct(rec["question"], rec.get("answer") or "", rec["prediction"])
        tick(progress, "judged")
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records),
        encoding="utf-8",
    )
    tmp.replace(path)
    return len(todo)


def write_metrics(out: Path) -> dict[str, Any]:
    return write_run_metrics(out, _system_metrics)


def _system_metrics(rs: list[dict[str, Any]]) -> dict[str, Any]:
    agg = lm.aggregate([r for r in rs if r.get("kind") == "question"])
    return {
        "f1": agg["f1"],
        "bleu1": agg["bleu1"],
        "judge": agg["judge"],
        "evidence_recall": agg["evidence_recall"],
        "n": agg["n"],
        "by_category": agg["by_category"],
        "cost": cost_metrics(rs),
    }


class LocomoTask(RunnerTask):
    """LoCoMo as a `Task` (bench/task.py): `run_locomo` on a LocomoRun built from the spec."""

    name = "locomo"
    title = "LoCoMo"
    data = ("locomo10.json",)
    config = LocomoRun
    limit_field = "conversations"

    def dataset(self, spec: RunSpec) -> list[ds.LocomoConversation]:
        return conversations(self.build(spec))

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        return run_locomo(
            self.build(spec),
            llm=models.llm,
            embedder=models.embedder,
            judge=models.judge,
            make=models.make,
        )

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_metrics(out)

    def page(self, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
        from deltamem.bench.report import locomo_page

        return locomo_page(metrics, records)


TASK = LocomoTask()
