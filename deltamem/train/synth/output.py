"""What a synthesis run writes to OUT:

- `halumem.jsonl`: one persona a line in HaluMem's format (SPEC §4.1), so
  `deltamem bench halumem OUT/halumem.jsonl` evaluates a memory system on it
  unchanged. Each session's gold points are its add / update operations (an
  update's `original_memories` quote the memory it replaces), plus its
  distractors (`memory_source: interference`); `none` operations are no gold
  points (nothing new to store). Extra keys (`synth`) keep the event, the
  fact → turn map and the keywords; HaluMem readers ignore them.
- `records.jsonl`: training records `(state_before, session, ops, state_after,
  keywords)` in the format of `deltamem train records` (`records.py`), with
  the generated keywords.
- `report.json`: acceptance per step, sessions kept and dropped with the
  reasons, time per kept session. `refusals.jsonl` (written as the run goes)
  holds every refused generation and pruned part with its reason.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltamem.bench.datasets import halumem as ds
from deltamem.train.records import TrainingOp, TrainingRecord
from deltamem.train.synth.cache import Cache
from deltamem.train.synth.data import PersonaResult, SessionResult

HALUMEM = "halumem.jsonl"
RECORDS = "records.jsonl"
REPORT = "report.json"
TYPE_NAMES = {
    "persona": "Persona Memory",
    "event": "Event Memory",
    "relationship": "Relationship Memory",
}
START_HOUR = 10
MINUTES_PER_TURN = 2


def stamp(t: dt.datetime) -> str:
    """HaluMem's timestamp form: "Jan 15, 2029, 15:12:20"."""
    return t.strftime("%b %d, %Y, %H:%M:%S")


def persona_info(result: PersonaResult) -> str:
    p = result.profile
    if p is None:
        return ""
    fields = [
        ("Name", p.name),
        ("Gender", p.gender),
        ("Current Age", str(p.age)),
        ("Location", p.location),
        ("Occupation", p.occupation),
        ("Highest Degree", p.education),
        ("Personality", p.personality),
        ("Summary", p.summary),
    ]
    return "; ".join(f"{k}: {v.replace(';', ',')}" for k, v in fields if v)


def _type(types: dict[str, str], text: str) -> str:
    return TYPE_NAMES.get(types.get(text, "persona"), "Persona Memory")


def halumem_session(s: SessionResult) -> dict[str, Any]:
    start = dt.datetime.combine(s.date, dt.time(START_HOUR))
    end = start + dt.timedelta(minutes=MINUTES_PER_TURN * len(s.turns))
    dialogue: list[dict[str, Any]] = []
    for k, turn in enumerate(s.turns):
        at = stamp(start + dt.timedelta(minutes=MINUTES_PER_TURN * k))
        dialogue.append({"role": "user", "content": turn.user, "timestamp": at, "dialogue_turn": k})
        dialogue.append(
            {"role": "assistant", "content": turn.assistant, "timestamp": at, "dialogue_turn": k}
        )
    points: list[dict[str, Any]] = []
    for op in s.ops:
        if op.op == "none":
            continue
        points.append(
            {
                "index": len(points) + 1,
                "memory_content": op.memory,
                "memory_type": TYPE_NAMES[op.type],
                "memory_source": "primary",
                "is_update": "True" if op.op == "update" else "False",
                "original_memories": [op.replaces] if op.op == "update" else [],
                "importance": 1.0,
                "timestamp": stamp(end),
            }
        )
    for d in s.distractors:
        points.append(
            {
                "index": len(points) + 1,
                "memory_content": d.memory,
                "memory_type": "Persona Memory",
                "memory_source": "interference",
                "is_update": "False",
                "original_memories": [],
                "importance": 1.0,
                "timestamp": stamp(end),
            }
        )
    questions = [
        {
            "question": q.question,
            "answer": q.answer,
            "evidence": [
                {"memory_content": e, "memory_type": _type(s.types, e)} for e in q.evidence
            ],
            "difficulty": q.difficulty,
            "question_type": q.type,
        }
        for q in s.questions
    ]
    coverage = [
        {
            "op": op.op,
            "memory": op.memory,
            "keywords": op.keywords,
            "replaces": op.replaces or None,
            "turn": s.coverage.get(f"F{j}"),
        }
        for j, op in enumerate(s.ops, 1)
    ]
    distractors = [
        {"memory": d.memory, "keywords": d.keywords, "turn": s.distractor_turns.get(f"D{j}")}
        for j, d in enumerate(s.distractors, 1)
    ]
    return {
        "start_time": stamp(start),
        "end_time": stamp(end),
        "memory_points_count": len(points),
        "memory_points": points,
        "dialogue_turn_num": len(s.turns),
        "dialogue": dialogue,
        "questions": questions,
        "synth": {
            "event": s.index,
            "title": s.title,
            "coverage": coverage,
            "distractors": distractors,
        },
    }


def halumem_user(result: PersonaResult) -> dict[str, Any]:
    profile = result.profile.model_dump(mode="json") if result.profile else None
    return {
        "uuid": result.id,
        "persona_info": persona_info(result),
        "sessions": [halumem_session(s) for s in result.sessions],
        "synth": {"seed": result.seed, "profile": profile},
    }


def training_records(result: PersonaResult) -> list[TrainingRecord]:
    """One record a kept session, its messages exactly as the bench and
    `records_from_halumem` read the HaluMem file."""
    name = result.profile.name if result.profile else None
    out = []
    for index, s in enumerate(result.sessions):
        bench = ds.to_bench_session(ds.Session.model_validate(halumem_session(s)), index, name)
        out.append(
            TrainingRecord(
                user=result.id,
                session=index,
                session_id=bench.session_id,
                timestamp=bench.timestamp.isoformat() if bench.timestamp else None,
                state_before=list(s.state_before),
                messages=[dict(m) for m in bench.messages],
                ops=[
                    TrainingOp(op.op, op.memory, list(op.keywords), op.replaces or None)
                    for op in s.ops
                ],
                state_after=list(s.state_after),
            )
        )
    return out


def report(results: Sequence[PersonaResult], cache_dir: Path) -> dict[str, Any]:
    """Acceptance and drops, from the caches (so a resumed run counts every step,
    whichever run generated it)."""
    steps: dict[str, dict[str, int]] = {}
    seconds = 0.0
    for r in results:
        for e in Cache(cache_dir / f"{r.id}.jsonl").entries():
            row = steps.setdefault(e.step, {"accepted": 0, "refused": 0, "dropped": 0, "pruned": 0})
            row["accepted" if e.ok else "dropped"] += 1
            row["refused"] += len(e.refusals)
            row["pruned"] += len(e.pruned)
            seconds += e.seconds
    accepted = sum(s["accepted"] for s in steps.values())
    refused = sum(s["refused"] for s in steps.values())
    planned = sum(r.planned for r in results)
    kept = sum(len(r.sessions) for r in results)
    sessions = [s for r in results for s in r.sessions]
    tried = accepted + refused
    return {
        "personas": {"asked": len(results), "kept": sum(1 for r in results if r.sessions)},
        "sessions": {"planned": planned, "kept": kept, "dropped": planned - kept},
        "generations": {
            "accepted": accepted,
            "refused": refused,
            "acceptance_rate": round(accepted / tried, 4) if tried else None,
        },
        "session_rate": round(kept / planned, 4) if planned else None,
        "by_step": steps,
        "seconds": round(seconds, 2),
        "seconds_per_kept_session": round(seconds / kept, 2) if kept else None,
        "counts": {
            "memory_points": sum(1 for s in sessions for o in s.ops if o.op != "none"),
            "updates": sum(1 for s in sessions for o in s.ops if o.op == "update"),
            "distractors": sum(len(s.distractors) for s in sessions),
            "questions": sum(len(s.questions) for s in sessions),
        },
        "drops": [
            {"persona": r.id, "step": k, "reason": why} for r in results for k, why in r.drops
        ],
    }


def write_outputs(
    out: Path, results: Sequence[PersonaResult], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """halumem.jsonl, records.jsonl and report.json (with `extra`) for the whole run."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / HALUMEM).open("w", encoding="utf-8") as fh:
        for r in results:
            if r.sessions:
                fh.write(json.dumps(halumem_user(r), ensure_ascii=False) + "\n")
    n = 0
    with (out / RECORDS).open("w", encoding="utf-8") as fh:
        for r in results:
            for rec in training_records(r):
                fh.write(json.dumps(rec.as_dict(), ensure_ascii=False) + "\n")
                n += 1
    rep = report(results, out / "cache")
    rep["records"] = n
    rep["files"] = {"halumem": str(out / HALUMEM), "records": str(out / RECORDS)}
    rep.update(extra or {})
    (out / REPORT).write_text(json.dumps(rep, indent=2, ensure_ascii=False), encoding="utf-8")
    return rep
