"""The pipeline's data: its settings and what it keeps of each persona and session."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from deltamem.train.synth.schemas import (
    DialogueTurn,
    Distractor,
    Op,
    Profile,
    Question,
)

Parse = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]]


class SynthError(RuntimeError):
    """The run cannot start (e.g. OUT holds an earlier run and --resume was not given)."""


@dataclass
class SynthConfig:
    events: int = 25  # per persona
    batch: int = 5  # events asked for in one call
    attempts: int = 3  # generations of one step before it is dropped
    initial_facts: int = 8
    fill: int = 2  # extra adds per event (memory filling)
    nones: int = 1  # memories repeated without change, per event
    distractors: int = 1  # per event
    questions: int = 2  # per session (0: none)
    anchor_steps: int = 4  # most events one anchor memory runs through
    span_days: int = 540
    temperature: float = 0.7
    # "turns": one call per fact, each writing the user's message that says it and the
    # assistant's reply (a 1.5B model does not weave five facts into one conversation);
    # "whole": the session's dialogue in one call, for models that can
    dialogue: Literal["turns", "whole"] = "turns"
    max_tokens: dict[str, int] = field(
        default_factory=lambda: {
            "profile": 1500,
            "events": 2500,
            "anchor": 1200,
            "ops": 1500,
            "dialogue": 3500,
            "turn": 400,
            "questions": 1200,
        }
    )


@dataclass
class SessionResult:
    index: int  # 0: the first conversation (S0); i: event i
    date: dt.date
    title: str
    ops: list[Op]
    distractors: list[Distractor]
    turns: list[DialogueTurn]
    coverage: dict[str, int]  # fact id (F1 = ops[0]) -> 1-based turn
    distractor_turns: dict[str, int]  # distractor id (D1 = distractors[0]) -> turn
    questions: list[Question]
    state_before: list[str]
    state_after: list[str]
    types: dict[str, str]  # memory text -> type, for every memory so far


@dataclass
class PersonaResult:
    id: str
    seed: str
    profile: Profile | None = None
    sessions: list[SessionResult] = field(default_factory=list)
    planned: int = 0  # sessions planned: the first conversation and each event
    drops: list[tuple[str, str]] = field(default_factory=list)  # (step key, reason)


def apply_ops(state: Sequence[str], ops: Sequence[Op]) -> list[str]:
    """S_{t+1} from S_t: an update replaces the entry it quotes (the new text goes
    last, as `records.py` orders a state), an add appends, `none` changes nothing."""
    out = list(state)
    for op in ops:
        if op.op == "update":
            out.remove(op.replaces)
            out.append(op.memory)
        elif op.op == "add":
            out.append(op.memory)
    return out
