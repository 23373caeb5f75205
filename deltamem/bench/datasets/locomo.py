"""LoCoMo (`locomo10.json`, read unchanged): a list of long conversations between
two people, each with QA pairs over categories 1–5.

Role mapping: deltamem messages have roles user/assistant, but both LoCoMo
speakers are people and memories are about both. We map `speaker_a` to role
"user" and `speaker_b` to role "assistant", and always set `name` to the
speaker's name so a manager (or prompt) can attribute facts to the right person.
A shared image is kept as text: "[shares a photo: <caption>]" after the turn.

Caveat: a manager that, like deltamem's (SPEC §2.5), stores only what the
*user* states will then ignore facts about speaker_b. `both_as_user=True` gives
both speakers role "user" (names still set) for systems that should remember
both people; the default follows the mapping above.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deltamem.bench.datasets.base import BenchSession, message, safe_time

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION = re.compile(r"^session_(\d+)$")
_DIA = re.compile(r"D\d+:\d+")


class LocomoTurn(BaseModel):
    model_config = ConfigDict(extra="allow")
    speaker: str
    dia_id: str
    text: str = ""
    blip_caption: str | None = None
    img_url: Any = None


class LocomoQA(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    answer: str | None = None
    evidence: list[str] = Field(default_factory=list)
    category: int
    adversarial_answer: str | None = None

    @field_validator("answer", "adversarial_answer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str | None:
        return None if v is None else str(v)

    @field_validator("evidence", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> list[str]:
        """Evidence ids as clean "D<session>:<turn>" strings (some entries pack
        several ids in one string, e.g. "D8:6; D9:17")."""
        out: list[str] = []
        for item in v or []:
            out.extend(_DIA.findall(str(item)))
        return out

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, str(self.category))


class LocomoSession(BaseModel):
    index: int
    date_time: str | None = None
    turns: list[LocomoTurn] = Field(default_factory=list)


class LocomoConversation(BaseModel):
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[LocomoSession]
    qa: list[LocomoQA] = Field(default_factory=list)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> LocomoConversation:
        conv = raw["conversation"]
        sessions = []
        for key, turns in conv.items():
            m = _SESSION.match(key)
            if not m or not isinstance(turns, list):
                continue
            n = int(m.group(1))
            sessions.append(
                LocomoSession(
                    index=n,
                    date_time=conv.get(f"session_{n}_date_time"),
                    turns=[LocomoTurn.model_validate(t) for t in turns],
                )
            )
        sessions.sort(key=lambda s: s.index)
        return cls(
            sample_id=str(raw.get("sample_id", "")),
            speaker_a=conv["speaker_a"],
            speaker_b=conv["speaker_b"],
            sessions=sessions,
            qa=[LocomoQA.model_validate(q) for q in raw.get("qa", [])],
        )

    def role_of(self, speaker: str, both_as_user: bool = False) -> str:
        if both_as_user:
            return "user"
        return "assistant" if speaker == self.speaker_b else "user"


def load(path: str | Path, limit: int | None = None) -> list[LocomoConversation]:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(raw, dict):  # a single conversation
        raw = [raw]
    convs = [LocomoConversation.from_raw(r) for r in raw]
    return convs[:limit] if limit is not None else convs


def turn_text(turn: LocomoTurn) -> str:
    text = turn.text.strip()
    if turn.blip_caption:
        text = f"{text} [shares a photo: {turn.blip_caption.strip()}]".strip()
    return text


def to_bench_session(
    conv: LocomoConversation, session: LocomoSession, both_as_user: bool = False
) -> BenchSession:
    ts = safe_time(session.date_time)
    messages: list[dict[str, Any]] = []
    ids: list[str] = []
    for t in session.turns:
        text = turn_text(t)
        if not text:
            continue
        messages.append(message(conv.role_of(t.speaker, both_as_user), text, ts, name=t.speaker))
        ids.append(t.dia_id)
    return BenchSession(
        session_id=f"session_{session.index}", timestamp=ts, messages=messages, turn_ids=ids
    )
