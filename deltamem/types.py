"""The data model shared by every layer: messages in, memories and operations out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deltamem.timeparse import parse_time

Role = Literal["user", "assistant", "system"]
MemoryType = Literal["persona", "event", "relationship"]
OpKind = Literal["add", "update", "none", "delete", "invalidate"]
# "deferred": logged (and searchable as episodes) with infer=False, not queued for the
# LLM until asked (`Memory.process_pending`, a job retry)
SessionStatus = Literal["pending", "applied", "failed", "deferred"]

MAX_MESSAGE_CHARS = 20_000
MAX_MEMORY_CHARS = 500


def utcnow() -> datetime:
    return datetime.now(UTC)


class Message(BaseModel):
    """One dialogue turn. `name` is the speaker's name when both sides are people."""

    model_config = ConfigDict(extra="ignore")

    role: Role
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    timestamp: datetime | None = None
    name: str | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _parse_ts(cls, v: Any) -> Any:
        return parse_time(v) if isinstance(v, (str, datetime)) else v  # naive -> UTC

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("message content is blank")
        return v


class MemoryItem(BaseModel):
    """One atomic, self-contained fact about a person, with where it came from."""

    id: str
    user_id: str
    agent_id: str | None = None
    content: str
    timestamp: datetime  # event time: the time of the session it came from
    memory_type: MemoryType | None = None
    keywords: list[str] = Field(default_factory=list)
    session_id: str | None = None
    turns: list[int] = Field(default_factory=list)  # dialogue turn indices it was derived from
    created_at: datetime
    updated_at: datetime
    version: int = 1
    # when a later fact ended or took it back (the event time of that session), and
    # the id of that fact: an outdated memory leaves search and answers, not history
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    # when it stops being served (deltamem/expiry.py): from then on it leaves search,
    # get_all and answers as an outdated memory does; `sweep_expired` removes it
    expires_at: datetime | None = None

    @field_validator("expires_at", mode="before")
    @classmethod
    def _parse_expiry(cls, v: Any) -> Any:
        return parse_time(v) if isinstance(v, (str, datetime)) else v  # naive -> UTC

    def expired(self, at: datetime | None = None) -> bool:
        """Whether its expiry has passed at `at` (default: now)."""
        return self.expires_at is not None and self.expires_at <= (at or utcnow())


class Operation(BaseModel):
    """An operation on the memory bank, as applied (or refused) for a session."""

    op: OpKind
    memory_id: str | None = None
    content: str | None = None
    old_content: str | None = None
    memory_type: MemoryType | None = None
    turns: list[int] = Field(default_factory=list)
    note: str | None = None  # why an operation was turned into `none`, when it was
    rule: str | None = None  # the code of the rule that refused or rewrote it (deltamem.rules)


class HistoryEntry(BaseModel):
    memory_id: str
    op: OpKind
    old_content: str | None
    new_content: str | None
    session_id: str | None
    actor: str  # "manager", "api" (the application), or "person" (by hand, the inspector)
    at: datetime
    user_id: str | None = None  # whose memory it was (lets a deleted memory's owner be checked)


class Version(HistoryEntry):
    """One entry of a memory's timeline, with where it came from: the turns of its
    session (`session_id`, `agent_id`) that the manager derived it from. An edit or a
    delete by a person or the application has no session and no turns."""

    agent_id: str | None = None
    turns: list[int] = Field(default_factory=list)


HitKind = Literal["fact", "episode"]


class Episode(BaseModel):
    """One raw dialogue turn of the session log, indexed for search beside the facts
    (the second tier: what the user said, in their words, when the manager missed it)."""

    id: str
    user_id: str
    agent_id: str | None = None
    session_id: str
    turn: int  # index of the message in its session
    role: Role
    name: str | None = None
    content: str
    timestamp: datetime  # the message's time, else its session's

    @property
    def speaker(self) -> str:
        return self.name or self.role


class SearchHit(BaseModel):
    """A search result. A `fact` hit is a memory of the bank; an `episode` hit is a
    raw turn of the session log shown in the same shape: `memory.id` is the episode
    id (not a memory id), `memory.content` the turn's text, `memory.turns` its index
    in the session, and `speaker` who said it."""

    memory: MemoryItem
    score: float
    kind: HitKind = "fact"
    speaker: str | None = None

    @classmethod
    def of_episode(cls, ep: Episode, score: float) -> SearchHit:
        item = MemoryItem(
            id=ep.id,
            user_id=ep.user_id,
            agent_id=ep.agent_id,
            content=ep.content,
            timestamp=ep.timestamp,
            session_id=ep.session_id,
            turns=[ep.turn],
            created_at=ep.timestamp,
            updated_at=ep.timestamp,
        )
        return cls(memory=item, score=score, kind="episode", speaker=ep.speaker)


class SessionRecord(BaseModel):
    """A row of the session log: the raw session, stored before any extraction runs."""

    user_id: str
    agent_id: str | None = None
    session_id: str
    timestamp: datetime
    messages: list[Message]
    content_hash: str
    status: SessionStatus = "pending"
    error: str | None = None
    attempts: int = 0
    seq: int = 0  # arrival order in the log; replay follows it
    # the expiry the memories derived from it get (over the type's TTL); None: the TTL
    expires_at: datetime | None = None

    @field_validator("expires_at", mode="before")
    @classmethod
    def _parse_expiry(cls, v: Any) -> Any:
        return parse_time(v) if isinstance(v, (str, datetime)) else v  # naive -> UTC


class AddResult(BaseModel):
    session_id: str
    status: SessionStatus
    operations: list[Operation] = Field(default_factory=list)
    already_applied: bool = False
    cost: dict[str, float] = Field(default_factory=dict)  # tokens, calls, seconds of this add

    @property
    def applied(self) -> list[Operation]:
        return [o for o in self.operations if o.op in ("add", "update")]


class SearchFilters(BaseModel):
    """Optional narrowing of a search or listing."""

    since: datetime | None = None
    until: datetime | None = None
    memory_type: MemoryType | None = None
    session_id: str | None = None
    # memories a later fact ended or took back (invalid_at set) are left out unless asked
    outdated: bool = False
    # ... and so are those whose expiry has passed (expires_at), unless asked
    expired: bool = False

    @field_validator("since", "until", mode="before")
    @classmethod
    def _parse_ts(cls, v: Any) -> Any:
        return parse_time(v) if isinstance(v, (str, datetime)) else v  # naive -> UTC
