"""MemBench (SPEC §4.3): files nest `{qa_type: {scenario: [trajectory]}}`.

A trajectory is `{tid, message_list, QA}`. Messages are either participation
(first person: `user_message`, `assistant_message`, `place`, `time`) or
observation (third person: `message`, `place`, `time`). `message_list` may be
flat or a list of sessions (lists); steps are numbered over the flattened list,
which is what `target_step_id` refers to. Messages are fed one step at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
            if isinstance(x, list):  # some files give [session, step] pairs
                out.extend(int(y) for y in x[-1:])
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

    def step_session(self, i: int) -> BenchSession:
        """Step i as a one-step session (participation: user + assistant turns)."""
        s = self.steps[i]
        ts = safe_time(s.time)
        msgs: list[dict[str, Any]] = []
        if s.participation:
            msgs.append(message("user", s.user_message or "", ts))
            if s.assistant_message:
                msgs.append(message("assistant", s.assistant_message, ts))
        elif s.message:
            msgs.append(message("user", s.message, ts))
        msgs = [m for m in msgs if m["content"].strip()]
        return BenchSession(
            session_id=f"step_{i}", timestamp=ts, messages=msgs, turn_ids=[str(i)] * len(msgs)
        )


def iter_trajectories(path: str | Path) -> Iterator[Trajectory]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for qa_type, scenarios in data.items():
        for scenario, trajectories in scenarios.items():
            for raw in trajectories:
                yield Trajectory.from_raw(raw, qa_type, scenario)
