"""Test doubles. A scripted LLM stands in for the model where a test is about the
code around it; every path also has a test with the real engine."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from deltamem.llm.base import LLM, ChatMessage, Completion
from deltamem.manager.agent import ManagerConfig
from deltamem.types import Message, SessionRecord

Reply = str | dict[str, Any] | Exception | Callable[[list[ChatMessage]], Any]


class ScriptedLLM(LLM):
    """Answers from a script, in order; records every request it receives."""

    name = "scripted"

    def __init__(
        self, replies: list[Reply] | None = None, *, default: Reply | None = None, retries: int = 1
    ) -> None:
        super().__init__(timeout=5.0, retries=retries)
        self.replies = list(replies or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def _chat(self, messages, *, schema, max_tokens, temperature, timeout) -> Completion:
        self.requests.append(
            {
                "messages": messages,
                "schema": schema,
                "temperature": temperature,
                "max_tokens": max_tokens,
            }
        )
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError("ScriptedLLM ran out of replies")
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(messages)
        if isinstance(reply, Exception):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt = sum(len(m["content"]) for m in messages) // 4
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=len(text) // 4)


class ScoringLLM(ScriptedLLM):
    """A scripted model that scores options: P("yes" first) is `p` for every scoring
    call, which is recorded in `requests` with its options."""

    def __init__(self, p_yes: float, replies: list[Reply] | None = None) -> None:
        super().__init__(replies)
        self.p = p_yes

    @property
    def scored(self) -> int:
        return sum("options" in r for r in self.requests)

    def _options(self, messages, options, *, timeout):  # type: ignore[no-untyped-def]
        self.requests.append({"messages": messages, "options": options})
        scores = {"yes": math.log(self.p), "no": math.log(1 - self.p)}
        return scores, Completion("", 10, 0)


# the manager strategy whose reply is one list of operations (what `ops` scripts)
SESSION = ManagerConfig(strategy="session")


def ops(*items: dict[str, Any]) -> dict[str, Any]:
    return {"operations": list(items)}


def add(content: str, type_: str = "persona") -> dict[str, Any]:
    return {"op": "add", "type": type_, "content": content}


def update(short_id: str, content: str, type_: str = "persona") -> dict[str, Any]:
    return {"op": "update", "id": short_id, "type": type_, "content": content}


# --- store-level helpers -------------------------------------------------------------
DIM = 384  # the local embedder's dimension; store tests use hand-made vectors of it
T0 = datetime(2029, 2, 13, 10, 51, 39, tzinfo=UTC)


def unit(*weights: float, dim: int = DIM) -> np.ndarray:
    """A unit vector whose first components are `weights` (the rest zero)."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(weights)] = weights
    return (v / np.linalg.norm(v)).astype(np.float32)


def locomo_conversation(
    sessions: list[tuple[str, list[tuple[str, str]]]], sample_id: str = "c1"
) -> dict[str, Any]:
    """A LoCoMo conversation as the dataset's JSON holds it, between Ann and Bob:
    each session its date and its (speaker, text) turns, numbered D<session>:<turn>."""
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n, (when, turns) in enumerate(sessions, start=1):
        conversation[f"session_{n}_date_time"] = when
        conversation[f"session_{n}"] = [
            {"speaker": who, "dia_id": f"D{n}:{i}", "text": text}
            for i, (who, text) in enumerate(turns, start=1)
        ]
    return {"sample_id": sample_id, "conversation": conversation, "qa": []}


def session(
    session_id: str = "s1",
    user_id: str = "u1",
    *,
    agent_id: str | None = None,
    timestamp: datetime = T0,
    text: str = "hello",
    content_hash: str | None = None,
) -> SessionRecord:
    return SessionRecord(
        user_id=user_id,
        agent_id=agent_id,
        session_id=session_id,
        timestamp=timestamp,
        messages=[Message(role="user", content=text)],
        content_hash=content_hash or f"hash-{session_id}-{text}",
    )


def undo_sqlite_migration_004(con: Any) -> None:
    """Make a SQLite store look as migration 003 left it (no episode tier, and none of
    the later migrations)."""
    for stmt in (
        "DROP INDEX memories_expiry",  # 008
        "ALTER TABLE sessions DROP COLUMN expires_at",
        "ALTER TABLE memories DROP COLUMN expires_at",
        "ALTER TABLE memories DROP COLUMN superseded_by",  # 007
        "ALTER TABLE memories DROP COLUMN invalid_at",
        "DROP INDEX llm_calls_session",  # 006
        "ALTER TABLE llm_calls DROP COLUMN session_id",
        "ALTER TABLE llm_calls DROP COLUMN agent_id",
        "ALTER TABLE llm_calls DROP COLUMN user_id",
        "ALTER TABLE sessions DROP COLUMN deferred",  # 005
        "DROP TABLE episodes_fts_vocab",
        "DROP TABLE episodes_fts",
        "DROP TABLE episodes",
        "DROP TABLE episode_versions",
        "DROP INDEX sessions_unindexed",
        "ALTER TABLE sessions DROP COLUMN indexed",
        "PRAGMA user_version=3",
    ):
        con.execute(stmt)


class RecordedBars:
    """A run's progress bars (`deltamem.bench.progress.Progress`), recorded: each
    bar's total and count, and the bars advanced without a total or past it."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.faults: list[str] = []

    def total(self, what: str, n: int) -> None:
        self.totals[what] = n

    def advance(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n
        if what not in self.totals:
            self.faults.append(f"{what}: advanced with no total")
        elif self.counts[what] > self.totals[what]:
            self.faults.append(f"{what}: {self.counts[what]} past its total {self.totals[what]}")

    def assert_ended(self) -> None:
        """Every bar had its total before it advanced, and ended at it."""
        assert self.faults == []
        assert {w: self.counts.get(w, 0) for w in self.totals} == self.totals
