"""Answering a finished run's questions again, from its log (`deltamem bench answer`).

A question record keeps every retrieved hit whole (text, kind, date, provenance)
and the time it was asked, so its answer can be made again without the system
that retrieved it: with another answerer, another model, or fewer of the hits.
Writing memory (the costly part on a small CPU) and answering are then separate
steps, and an answerer change is measured on the very retrievals the run made.

The new run directory gets every record of the old one; question records get the
new prediction and their judge-free figures again (HaluMem answer F1; LoCoMo F1
and BLEU-1), their verdicts cleared for the judges to give again. Judgments of
other records are carried over. A rerun with the same output resumes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.answer import Answerer, Order
from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.log import JUDGMENTS, RESULTS, ResultLog, read_records
from deltamem.bench.metrics import locomo as lm
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.systems.base import Retrieved
from deltamem.llm.base import LLM

MANIFEST = "answered.json"  # in the new run: where its answers came from


@dataclass
class ReanswerRun:
    source: Path  # a run directory whose question records carry `hits`
    out: Path
    k: int | None = None  # answer from the first k hits only (None: all logged)
    systems: tuple[str, ...] = ()  # only these systems' questions (empty: all)
    resume: bool = False
    order: Order = "date"  # how the answerer lists the hits
    # LoCoMo only: answer these categories' questions (empty: all). The headline
    # figures cover 1-4, so leaving 5 out saves a quarter of the answering time.
    categories: tuple[int, ...] = ()


def is_question(rec: dict[str, Any]) -> bool:
    return rec.get("kind") == "question" and "question" in rec


def answer_again(rec: dict[str, Any], answerer: Answerer, k: int | None) -> dict[str, Any]:
    """The record with a new prediction from its logged hits."""
    if "hits" not in rec:
        raise ValueError(
            f"{rec['key']}: the record keeps no hits (a run from before they were logged)"
        )
    found = [Retrieved.from_record(h) for h in rec["hits"]][:k]
    asked_at = datetime.fromisoformat(rec["asked_at"])
    new = dict(rec)
    for stale in ("verdict", "judge", "judge_reason", "not_answered", "error"):
        new.pop(stale, None)
    new["error"] = None
    new["answered_from"] = len(found)
    t0 = time.perf_counter()
    try:
        ans = answerer.answer(
            rec["question"], as_search_hits(found, rec["user"], asked_at), asked_at=asked_at
        )
        prediction = ans.text
    except Exception as exc:
        prediction, new["error"] = "", error_text(exc)
    new["answer_seconds"] = time.perf_counter() - t0
    new["prediction"] = prediction
    if "category" in rec:  # LoCoMo
        cat = int(rec["category"])
        new["f1"] = lm.answer_f1(prediction, rec.get("answer"), cat)
        new["bleu1"] = (
            None if cat == 5 else lm.bleu1(prediction, lm.gold_for(cat, rec.get("answer") or ""))
        )
        new["judge"] = None
    else:  # HaluMem
        new["verdict"] = None
        new["answer_f1"] = lm.token_f1(prediction, str(rec.get("answer", "")))
    return new


def reanswer(run: ReanswerRun, llm: LLM, *, progress: Progress | None = None) -> int:
    """Answer the source run's questions again into `run.out`; returns how many
    questions were answered in this call (those already there are skipped)."""
    records = list(read_records(run.source / RESULTS))
    run.out.mkdir(parents=True, exist_ok=True)
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    answerer = Answerer(llm, order=run.order)

    def to_answer(rec: dict[str, Any]) -> bool:
        chosen = (not run.systems or rec.get("system") in run.systems) and (
            not run.categories or "category" not in rec or int(rec["category"]) in run.categories
        )
        return is_question(rec) and chosen and rec.get("hits") is not None

    try:
        todo: dict[str, dict[str, Any]] = {}  # by key, as the log keeps them: first one wins
        for rec in records:
            if not log.has(str(rec["key"])):
                todo.setdefault(str(rec["key"]), rec)
        answered = sum(map(to_answer, todo.values()))
        declare(progress, {"questions": answered})
        for rec in todo.values():
            if to_answer(rec):
                log.write(answer_again(rec, answerer, run.k))
                tick(progress, "questions")
            else:
                log.write(rec)
    finally:
        log.close()
    carry_judgments(run.source, run.out, {str(r["key"]) for r in records if is_question(r)})
    manifest = {
        "source": str(run.source),
        "k": run.k,
        "order": run.order,
        "llm": llm.name,
        "systems": run.systems,
        "categories": run.categories,
    }
    (run.out / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return answered


def carry_judgments(source: Path, out: Path, questions: set[str]) -> None:
    """The old run's verdicts on everything but its questions (extraction, updates
    did not change), unless the new run has its own judgments already."""
    old, new = source / JUDGMENTS, out / JUDGMENTS
    if not old.is_file() or new.is_file():
        return
    kept = [j for j in read_records(old) if str(j.get("key")) not in questions]
    new.write_text("".join(json.dumps(j, ensure_ascii=False) + "\n" for j in kept), "utf-8")
