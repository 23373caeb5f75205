"""What each synthesis step asks the model for: the reply's shape twice over, as a
pydantic model (the check after decoding) and as a JSON schema (the grammar or
`response_format` that steers decoding where the engine supports it).

The schemas are kept flat and short: deeply nested schemas make constrained
decoding slow on llama.cpp, and a server may ignore them anyway, so the pydantic
models and `checks.py` are what decide. Where a reply must quote something it was
shown (a memory an update replaces, a fact id), the schema enumerates the choices.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Area = Literal["career", "health", "relationship", "preference"]
ChangeKind = Literal["new", "expand", "adjust", "shift", "partial_deletion"]
OpKind = Literal["add", "update", "none"]
MemoryType = Literal["persona", "event", "relationship"]
AnchorMethod = Literal["emotional", "meaning", "self_belief"]
Difficulty = Literal["easy", "medium", "hard"]
QuestionType = Literal[
    "Basic Fact Recall",
    "Multi-hop Inference",
    "Dynamic Update",
    "Memory Boundary",
    "Generalization & Application",
    "Memory Conflict",
]

AREAS: tuple[str, ...] = ("career", "health", "relationship", "preference")
CHANGES: tuple[str, ...] = ("new", "expand", "adjust", "shift", "partial_deletion")
MEMORY_TYPES: tuple[str, ...] = ("persona", "event", "relationship")
ANCHOR_METHODS: tuple[str, ...] = ("emotional", "meaning", "self_belief")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
QUESTION_TYPES: tuple[str, ...] = (
    "Basic Fact Recall",
    "Multi-hop Inference",
    "Dynamic Update",
    "Memory Boundary",
    "Generalization & Application",
    "Memory Conflict",
)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


# --- step 1: profile and initial memory state ------------------------------------------
class Profile(_Reply):
    name: str = Field(min_length=3)
    gender: str = ""
    age: int = Field(ge=1, le=120)
    location: str = ""
    occupation: str = ""
    education: str = ""
    personality: str = ""
    summary: str = ""

    @property
    def first_name(self) -> str:
        return self.name.split()[0]


class Fact(_Reply):
    area: Area
    content: str = Field(min_length=1)
    keywords: list[str]


class ProfileReply(_Reply):
    profile: Profile
    start_date: dt.date
    facts: list[Fact] = Field(min_length=3)


# --- step 2: chronological events with state deltas -------------------------------------
class Change(_Reply):
    area: Area
    change: ChangeKind
    before: str = ""  # the exact prior fact; empty for "new"
    after: str = Field(min_length=1)


class Event(_Reply):
    date: dt.date
    title: str = Field(min_length=1)
    narrative: str = Field(min_length=1)
    changes: list[Change] = Field(default_factory=list)


class EventsReply(_Reply):
    events: list[Event] = Field(min_length=1)


# --- step 3a: inter-event evolution of one anchor memory --------------------------------
class AnchorStep(_Reply):
    event: int = Field(ge=1)  # 1-based number of the event in the timeline
    memory: str = Field(min_length=1)
    keywords: list[str]


class AnchorReply(_Reply):
    method: AnchorMethod
    thread: list[AnchorStep] = Field(min_length=2)


# --- step 3b: the memory operations of one event ----------------------------------------
class Op(_Reply):
    op: OpKind
    type: MemoryType = "persona"
    memory: str = Field(min_length=1)
    replaces: str = ""  # update: the exact state entry it replaces
    keywords: list[str]


class Distractor(_Reply):
    memory: str = Field(min_length=1)
    keywords: list[str]


class OpsReply(_Reply):
    operations: list[Op] = Field(min_length=1)
    distractors: list[Distractor] = Field(default_factory=list)


# --- step 4: the dialogue and its coverage map ------------------------------------------
class DialogueTurn(_Reply):
    user: str
    assistant: str


class Placement(_Reply):
    id: str
    turn: int  # 1-based


class DialogueReply(_Reply):
    turns: list[DialogueTurn] = Field(min_length=1)
    facts: list[Placement] = Field(default_factory=list)
    distractors: list[Placement] = Field(default_factory=list)


# --- HaluMem's questions ----------------------------------------------------------------
class Question(_Reply):
    type: QuestionType
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    difficulty: Difficulty = "medium"
    evidence: list[str] = Field(default_factory=list)


class QuestionsReply(_Reply):
    questions: list[Question] = Field(default_factory=list)


# --- JSON schemas for decoding ------------------------------------------------------------
_STR: dict[str, Any] = {"type": "string"}
_KEYWORDS: dict[str, Any] = {"type": "array", "items": _STR, "minItems": 2, "maxItems": 4}


def _obj(props: dict[str, Any], required: Sequence[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required or props)}


def _array(items: dict[str, Any], lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items, "minItems": lo}
    if hi is not None:
        out["maxItems"] = hi
    return out


def _choice(options: Sequence[str]) -> dict[str, Any]:
    return {"enum": list(dict.fromkeys(options))} if options else _STR


PROFILE_SCHEMA = _obj(
    {
        "profile": _obj(
            {
                "name": _STR,
                "gender": _STR,
                "age": {"type": "integer"},
                "location": _STR,
                "occupation": _STR,
                "education": _STR,
                "personality": _STR,
                "summary": _STR,
            }
        ),
        "start_date": _STR,
        "facts": _array(
            _obj({"area": _choice(AREAS), "content": _STR, "keywords": _KEYWORDS}), 3, 16
        ),
    }
)


def events_schema(count: int) -> dict[str, Any]:
    change = _obj(
        {"area": _choice(AREAS), "change": _choice(CHANGES), "before": _STR, "after": _STR}
    )
    event = _obj(
        {
            "date": _STR,
            "title": _STR,
            "narrative": _STR,
            "changes": _array(change, 1, 3),
        }
    )
    return _obj({"events": _array(event, count, count)})


def anchor_schema(n_events: int) -> dict[str, Any]:
    step = _obj(
        {
            "event": {"type": "integer", "minimum": 1, "maximum": max(1, n_events)},
            "memory": _STR,
            "keywords": _KEYWORDS,
        }
    )
    return _obj({"method": _choice(ANCHOR_METHODS), "thread": _array(step, 2, n_events)})


def ops_schema(state: Sequence[str]) -> dict[str, Any]:
    """Operations on a state: an update's `replaces` is one of the state's entries
    (an empty string for the other ops)."""
    replaces = _choice(["", *state]) if state else {"const": ""}
    op = _obj(
        {
            "op": _choice(["add", "update", "none"] if state else ["add"]),
            "type": _choice(MEMORY_TYPES),
            "memory": _STR,
            "replaces": replaces,
            "keywords": _KEYWORDS,
        }
    )
    distractor = _obj({"memory": _STR, "keywords": _KEYWORDS})
    return _obj({"operations": _array(op, 1, 12), "distractors": _array(distractor, 0, 3)})


# one exchange of a dialogue written a fact at a time (`SynthConfig.dialogue="turns"`)
TURN_SCHEMA = _obj({"user": _STR, "assistant": _STR})


def dialogue_schema(
    fact_ids: Sequence[str], distractor_ids: Sequence[str], max_turns: int
) -> dict[str, Any]:
    turn = _obj({"user": _STR, "assistant": _STR})
    turn_no = {"type": "integer", "minimum": 1, "maximum": max_turns}
    props: dict[str, Any] = {
        "turns": _array(turn, 1, max_turns),
        "facts": _array(_obj({"id": _choice(fact_ids), "turn": turn_no}), len(fact_ids)),
    }
    if distractor_ids:
        props["distractors"] = _array(
            _obj({"id": _choice(distractor_ids), "turn": turn_no}), len(distractor_ids)
        )
    return _obj(props)


def questions_schema(evidence: Sequence[str], count: int) -> dict[str, Any]:
    question = _obj(
        {
            "type": _choice(QUESTION_TYPES),
            "question": _STR,
            "answer": _STR,
            "difficulty": _choice(DIFFICULTIES),
            "evidence": _array(_choice(evidence), 0, 4),
        }
    )
    return _obj({"questions": _array(question, 1, max(1, count))})
