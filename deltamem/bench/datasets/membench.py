"""MemBench (SPEC §4.3): files nest `{qa_type: {scenario: [trajectory]}}`.

A trajectory is `{tid, message_list, QA}`. Messages are either participation
(first person: `user_message`, `assistant_message`, `place`, `time`; the
official test sets write `user` / `agent` or `user` / `assistant`) or
observation (third person: `message`, `place`, `time`; the test sets write a
plain string). `message_list` may be flat or a list of sessions (lists); steps
are numbered over the flattened list, which is what `target_step_id` refers to
(session-grouped files give `[step, session]` pairs: the step is the first
element, as MemBench's own noise insertion reads it). Messages are fed one step
at a time.

The two top keys name the question type (the official `FirstAgentDataLowLevel`
style files key it by source file: simple, aggregative, ..., highlevel,
highlevel_rec) and a topic group (roles, events, ...). The memory level is
reflective for the `highlevel*` types and factual otherwise; the scenario is
participation when the steps are first-person dialogue, observation otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deltamem.bench.datasets.base import BenchSession, message, safe_time


class MBQA(BaseModel):
    model_config = ConfigDict(extra="allow")
    qid: int | str | None = None
    question: str
    answer: str = ""
    time: str | None = None
    target_step_id: list[int] = Field(default_factory=list)
    choices: dict[str, str] = Field(default_factory=dict)
    ground_truth: str = ""

    @field_validator("choices", mode="before")
    @classmethod
    def _choices(cls, v: Any) -> dict[str, str]:
        if isinstance(v, list):  # a bare list of options: letters A, B, ...
            return {chr(ord("A") + i): str(x) for i, x in enumerate(v)}
        return {str(k): str(x) for k, x in (v or {}).items()}

    @field_validator("answer", "ground_truth", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("target_step_id", mode="before")
    @classmethod
    def _ints(cls, v: Any) -> list[int]:
        if v is None:
            return []
        items = v if isinstance(v, list) else [v]
        out: list[int] = []
        for x in items:
            if isinstance(x, list):  # session-grouped files give [step, session] pairs
                out.extend(int(y) for y in x[:1])
            else:
                out.append(int(x))
        return out


class MBStep(BaseModel):
    model_config = ConfigDict(extra="allow")
    user_message: str | None = None
    assistant_message: str | None = None
    message: str | None = None
    place: str | None = None
    time: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shapes(cls, v: Any) -> Any:
        """A plain string is an observation; `user` / `agent` / `assistant` keys
        (the official test sets) are a participation step."""
        if isinstance(v, str):
            return {"message": v}
        if isinstance(v, dict) and "user_message" not in v and "user" in v:
            reply = v.get("assistant", v.get("agent"))
            return {**v, "user_message": v["user"], "assistant_message": reply}
        return v

    @property
    def participation(self) -> bool:
        return self.user_message is not None


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="allow")
    tid: int | str
    qa_type: str = ""
    scenario: str = ""
    steps: list[MBStep]
    qa: MBQA

    @classmethod
    def from_raw(cls, raw: dict[str, Any], qa_type: str, scenario: str) -> Trajectory:
        flat: list[Any] = []
        for item in raw.get("message_list", []):
            flat.extend(item if isinstance(item, list) else [item])
        return cls(
            tid=raw.get("tid", ""),
            qa_type=qa_type,
            scenario=scenario,
            steps=[MBStep.model_validate(s) for s in flat],
            qa=MBQA.model_validate(raw["QA"]),
        )

    @property
    def key(self) -> str:
        """Unique within a file (tids repeat across question types and groups)."""
        return f"{self.qa_type}:{self.scenario}:{self.tid}"

    @property
    def level(self) -> str:
        return "reflective" if "highlevel" in self.qa_type.lower() else "factual"

    @property
    def setting(self) -> str:
        """participation (first person) or observation (third person)."""
        return "participation" if any(s.participation for s in self.steps) else "observation"

    def step_session(self, i: int) -> BenchSession:
        """Step i as a one-step session (participation: user + assistant turns)."""
        return step_to_session(self.steps[i], f"step_{i}", str(i))


_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?")


def when(value: str | None) -> datetime | None:
    """A step's or question's time: the whole string if it parses, else the first
    "YYYY-MM-DD[ HH:MM]" in it (MemBench writes times like "'2024-10-01 08:00'
    Tuesday"); None when there is none."""
    found = safe_time(value)
    if found is None and value:
        m = _DATE.search(value)
        found = safe_time(m.group(0)) if m else None
    return found


def step_to_session(
    step: MBStep, session_id: str, turn_id: str, default_time: datetime | None = None
) -> BenchSession:
    """One step as a session of its own: a participation step as a user and an
    assistant turn, an observation as a third-person message with role user. The
    step's time is the session's; its place (and a time that does not parse) is
    kept in the first message's text, "... (place: office)"."""
    own = when(step.time)
    ts = own or default_time
    notes = [f"place: {step.place.strip()}"] if step.place and step.place.strip() else []
    if step.time and step.time.strip() and own is None:
        notes.append(f"time: {step.time.strip()}")
    where = f" ({'; '.join(notes)})" if notes else ""
    msgs: list[dict[str, Any]] = []
    if step.participation and (step.user_message or "").strip():
        msgs.append(message("user", f"{step.user_message}{where}", ts))
        if step.assistant_message:
            msgs.append(message("assistant", step.assistant_message, ts))
    elif not step.participation and (step.message or "").strip():
        msgs.append(message("user", f"{step.message}{where}", ts))
    msgs = [m for m in msgs if m["content"].strip()]
    return BenchSession(
        session_id=session_id, timestamp=ts, messages=msgs, turn_ids=[turn_id] * len(msgs)
    )


def iter_trajectories(path: str | Path) -> Iterator[Trajectory]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for qa_type, scenarios in data.items():
        for scenario, trajectories in scenarios.items():
            for raw in trajectories:
                yield Trajectory.from_raw(raw, qa_type, scenario)
