"""HaluMem judges over a finished run's records (SPEC §4.1).

Reads OUT/results.jsonl, asks the four judges (integrity per gold point,
accuracy per extracted memory, update per update target, QA per question) and
appends each verdict to OUT/judgments.jsonl as `{"key", "fields"}` as soon as it
is known; keys already judged are skipped, and identical questions are served
from the SQLite cache. The accuracy judge needs the dialogue, read again from
the dataset.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from deltamem.bench.datasets import halumem as ds
from deltamem.bench.judges.base import CACHE, JudgeCache
from deltamem.bench.judges.sets import JudgeSet, make_judges
from deltamem.bench.log import JUDGMENTS, RESULTS, read_records
from deltamem.bench.progress import Progress, declare, tick
from deltamem.llm.base import LLM

# which judge scores which kind of record
KIND_OF_JUDGE = {
    "point": "integrity",
    "extracted": "accuracy",
    "update": "update",
    "question": "qa",
}
JUDGES = frozenset(KIND_OF_JUDGE.values())


def dialogue_lines(session: ds.Session) -> list[str]:
    return [f"{t.role}: {t.content}" for t in session.dialogue if t.content.strip()]


def judge_run(
    out: Path,
    data: Path,
    llm: LLM,
    *,
    progress: Progress | None = None,
    kinds: frozenset[str] = JUDGES,
    mode: str = "auto",
) -> int:
    """Judge every record not judged yet; return how many verdicts were added.
    `kinds` narrows the judges that run (a later run can add the others); `mode`
    picks rubric or decomposed judges (`sets.make_judges`)."""
    records = list(read_records(out / RESULTS))
    done = {str(j["key"]) for j in read_records(out / JUDGMENTS)}
    cache = JudgeCache(out / CACHE)
    judges = make_judges(llm, cache, mode)
    memories = {
        (r["system"], r["user"], r["session"]): r.get("memories", [])
        for r in records
        if r.get("kind") == "session"
    }
    todo = [
        r
        for r in records
        if KIND_OF_JUDGE.get(str(r.get("kind"))) in kinds
        and str(r["key"]) not in done
        and not r.get("not_judged")
        and not (r.get("kind") == "question" and r.get("not_answered"))
    ]
    declare(progress, Counter(f"judge {r['kind']}" for r in todo))
    need_users = {r["user"] for r in todo if r["kind"] == "extracted"}
    sessions: dict[tuple[str, int], ds.Session] = {}
    if need_users:
        for user in ds.iter_users(data):
            if user.uuid in need_users:
                for i, s in enumerate(user.sessions):
                    sessions[(user.uuid, i)] = s
    added = 0
    with (out / JUDGMENTS).open("a", encoding="utf-8") as fh:
        for r in todo:
            fields = _judge_one(r, judges, memories, sessions)
            if fields is not None:  # None: an extracted memory whose session the data lacks
                fields["judge_mode"] = judges.mode
                line = json.dumps({"key": r["key"], "fields": fields}, ensure_ascii=False)
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                added += 1
            tick(progress, f"judge {r['kind']}")
    cache.close()
    return added


def _judge_one(
    r: dict[str, Any],
    judges: JudgeSet,
    memories: dict[tuple[str, str, int], list[str]],
    sessions: dict[tuple[str, int], ds.Session],
) -> dict[str, Any] | None:
    kind = r["kind"]
    if kind == "point":
        mems = memories.get((r["system"], r["user"], r["session"]), [])
        reply = judges.integrity(mems, r["memory_content"])
        return {"score": int(reply["score"]), "judge_reason": reply.get("reason")}
    if kind == "extracted":
        session = sessions.get((r["user"], r["session"]))
        if session is None:
            return None
        gold = [p.memory_content for p in session.memory_points if not p.is_distractor]
        reply = judges.accuracy(dialogue_lines(session), gold, r["memory"])
        return {
            "score": int(reply["score"]),
            "included": bool(reply["included"]),
            "judge_reason": reply.get("reason"),
        }
    if kind == "update":
        reply = judges.update(
            list(r.get("original_memories", [])), r["memory_content"], list(r.get("retrieved", []))
        )
        return {"verdict": reply["verdict"], "judge_reason": reply.get("reason")}
    if kind == "question" and r.get("not_answered"):
        return None  # a run without answers: nothing to judge
    if kind == "question":
        reply = judges.qa(
            r["question"],
            str(r.get("answer", "")),
            list(r.get("evidence", [])),
            r.get("prediction") or "",
        )
        return {"verdict": reply["verdict"], "judge_reason": reply.get("reason")}
    return None
