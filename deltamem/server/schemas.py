"""Request and response bodies of the REST API (they make its OpenAPI spec).

Requests are strict about shape and size; the domain checks (timestamps, message
content) stay in `Memory`, whose errors the API turns into 422s. Responses never
show the store's internal user id: memories carry the caller's user id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from deltamem.llm.base import CallRecord
from deltamem.memory import MAX_SESSION_MESSAGES
from deltamem.server.scope import check_id, external_user
from deltamem.types import (
    MAX_MESSAGE_CHARS,
    HistoryEntry,
    MemoryItem,
    MemoryType,
    Message,
    Operation,
    SearchHit,
    SessionRecord,
    SessionStatus,
    Version,
)


def _unicode(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("text is not valid Unicode (lone surrogate)") from exc
    return value


def _id(what: str) -> AfterValidator:
    return AfterValidator(lambda v: check_id(v, what))


UserId = Annotated[str, Field(min_length=1, max_length=256), _id("user_id")]
AgentId = Annotated[str, Field(min_length=1, max_length=256), _id("agent_id")]
SessionId = Annotated[str, Field(min_length=1, max_length=256), _id("session_id")]
Text = Annotated[str, AfterValidator(_unicode)]
Timestamp = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_unicode)]


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: Annotated[Text, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    timestamp: Timestamp | None = None
    name: Annotated[Text, Field(max_length=256)] | None = None


class SessionIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "user_id": "martin",
                "session_id": "s1",
                "timestamp": "2029-02-13T10:51:39",
                "messages": [
                    {"role": "user", "content": "I just started as a UX designer at Brightloop."},
                    {"role": "assistant", "content": "Congratulations on the new job!"},
                ],
            }
        },
    )

    user_id: UserId
    session_id: SessionId | None = None
    timestamp: Timestamp | None = None
    agent_id: AgentId | None = None
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=MAX_SESSION_MESSAGES)]
    infer: bool = Field(
        True,
        description="false: store the session verbatim (its turns are searchable at once) "
        "without queueing it for the LLM; the job stays 'deferred' until "
        "POST /v1/jobs/{id}/retry or POST /v1/sessions/process",
    )
    expires_at: Timestamp | None = Field(
        None,
        description="when the memories derived from this session stop being served (they "
        "leave search, listings and answers, and a sweep deletes them); default: the TTL "
        "of their type, if one is configured",
    )


class FiltersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    since: Timestamp | None = None
    until: Timestamp | None = None
    memory_type: MemoryType | None = None
    session_id: SessionId | None = None


# which tiers a search reads: facts and raw turns (episodes), or one of them
TiersIn = Literal["all", "facts", "episodes"]


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Annotated[Text, Field(min_length=1, max_length=4000)]
    user_id: UserId
    agent_id: AgentId | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    filters: FiltersIn | None = None
    tiers: TiersIn = "all"


class AnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Annotated[Text, Field(min_length=1, max_length=4000)]
    user_id: UserId
    agent_id: AgentId | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    asked_at: Timestamp | None = None
    tiers: TiersIn = "all"


class ProcessIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: UserId | None = None


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId | None = None


# who a hand edit or delete is recorded as: the application, or a person (by hand);
# "manager" is the LLM's alone, so the API cannot write it
Actor = Literal["api", "person"]


class EditIn(BaseModel):
    """A hand correction of a memory: a new version, kept in its history."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"content": "Martin works at Brightloop as a UX lead."}},
    )

    # the memory's own limit (500 characters, after stripping) is checked by
    # `Memory.edit`: 422 "Invalid edit"; this bound only keeps bodies small
    content: Annotated[Text, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)] | None = None
    actor: Actor = Field("person", description="who made the edit, as its history will say")
    expires_at: Timestamp | None = Field(
        None,
        description="when the memory stops being served (null: never); left as it is "
        "when the field is not sent",
    )

    @model_validator(mode="after")
    def _something(self) -> EditIn:
        if self.content is None and "expires_at" not in self.model_fields_set:
            raise ValueError("give the new content, expires_at, or both")
        return self


# --- responses -------------------------------------------------------------------------
class Problem(BaseModel):
    """An error (RFC 9457 problem details), served as ``application/problem+json``."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    instance: str | None = None


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for problem-details errors."""
    return {s: {"model": Problem, "content": {"application/problem+json": {}}} for s in statuses}


class MemoryOut(BaseModel):
    id: str
    user_id: str
    agent_id: str | None = None
    content: str
    timestamp: datetime
    memory_type: MemoryType | None = None
    keywords: list[str] = Field(default_factory=list)
    session_id: str | None = None
    turns: list[int] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    version: int = 1
    expires_at: datetime | None = None

    @classmethod
    def of(cls, mem: MemoryItem) -> MemoryOut:
        data = mem.model_dump()
        data["user_id"] = external_user(mem.user_id)[1]
        return cls.model_validate(data)


class MemoryList(BaseModel):
    user_id: str
    count: int
    memories: list[MemoryOut]


class HitOut(BaseModel):
    """A fact of the memory bank, or (`kind` "episode") a raw turn of the session log:
    then `memory.id` is the episode's id and `speaker` says who said it."""

    memory: MemoryOut
    score: float
    kind: Literal["fact", "episode"] = "fact"
    speaker: str | None = None

    @classmethod
    def of(cls, hit: SearchHit) -> HitOut:
        return cls(
            memory=MemoryOut.of(hit.memory), score=hit.score, kind=hit.kind, speaker=hit.speaker
        )


class SearchOut(BaseModel):
    query: str
    results: list[HitOut]


class AnswerOut(BaseModel):
    question: str
    answer: str
    memories: list[HitOut]


class HistoryRow(BaseModel):
    op: str
    old_content: str | None = None
    new_content: str | None = None
    session_id: str | None = None
    actor: str
    at: datetime


class HistoryOut(BaseModel):
    memory_id: str
    history: list[HistoryRow]

    @classmethod
    def of(cls, memory_id: str, entries: list[HistoryEntry]) -> HistoryOut:
        rows = [
            HistoryRow.model_validate(e.model_dump(include=set(HistoryRow.model_fields)))
            for e in entries
        ]
        return cls(memory_id=memory_id, history=rows)


class SessionMemories(BaseModel):
    session_id: str
    user_id: str
    memories: list[MemoryOut]


# "cancelled": only in the answer to DELETE /v1/jobs/{id} (the job is gone after it)
JobStatus = Literal["pending", "running", "applied", "failed", "deferred", "cancelled"]


class JobOut(BaseModel):
    job_id: str
    user_id: str
    session_id: str
    agent_id: str | None = None
    status: JobStatus
    error: str | None = None
    attempts: int = 0
    timestamp: datetime | None = None
    operations: list[Operation] | None = None
    retry_queued: bool = False


class ReplayOut(BaseModel):
    user_id: str
    agent_id: str | None = None
    status: Literal["pending"] = "pending"
    removed_memories: int
    jobs: list[str]


class ProcessOut(BaseModel):
    user_id: str | None = None
    jobs: list[str]


class ResetOut(BaseModel):
    user_id: str
    agent_id: str | None = None
    removed_memories: int
    removed: dict[str, int] = Field(
        default_factory=dict,
        description="rows removed by kind: sessions (the session log, which is the job "
        "queue), memories, history, episodes, calls (the model call log), leases; "
        "with agent_id, memories alone",
    )
    cancelled_jobs: list[str] = Field(
        default_factory=list,
        description="the user's jobs that were not applied (queued, running, deferred, "
        "failed), cancelled with the user; a running one's result is dropped",
    )


class ImportOut(BaseModel):
    """What an import added, and what the store held already (left as it was)."""

    user_id: str
    sessions: int
    memories: int
    episodes: int
    skipped_sessions: int
    skipped_memories: int
    jobs: list[str] = Field(
        default_factory=list, description="the imported sessions queued for the worker"
    )


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    worker: dict[str, Any]


class VersionOut(HistoryRow):
    """One version of a memory's timeline, with the session and turns it came from."""

    user_id: str | None = None
    agent_id: str | None = None
    turns: list[int] = Field(default_factory=list)

    @classmethod
    def of(cls, v: Version) -> VersionOut:
        data = v.model_dump(include=set(cls.model_fields))
        if v.user_id is not None:
            data["user_id"] = external_user(v.user_id)[1]
        return cls.model_validate(data)


class TimelineOut(BaseModel):
    memory_id: str
    timeline: list[VersionOut]


class SessionOut(BaseModel):
    """A session of the log: its messages, status, error and tries. (The store's
    arrival counter is not shown: it counts every tenant's sessions.)"""

    user_id: str
    agent_id: str | None = None
    session_id: str
    timestamp: datetime
    messages: list[Message]
    content_hash: str
    status: SessionStatus
    error: str | None = None
    attempts: int = 0

    @classmethod
    def of(cls, rec: SessionRecord) -> SessionOut:
        data = rec.model_dump(include=set(cls.model_fields))
        data["user_id"] = external_user(rec.user_id)[1]
        return cls.model_validate(data)


class SessionList(BaseModel):
    user_id: str | None = None
    count: int
    sessions: list[SessionOut]


class CallOut(BaseModel):
    """One LLM call made for a session, with the model's raw reply."""

    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    seconds: float
    ok: bool
    error: str | None = None
    at: datetime
    reply: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None

    @classmethod
    def of(cls, call: CallRecord) -> CallOut:
        data = {name: getattr(call, name) for name in cls.model_fields}
        if call.user_id is not None:
            data["user_id"] = external_user(call.user_id)[1]
        return cls.model_validate(data)


class CallList(BaseModel):
    session_id: str
    user_id: str
    agent_id: str | None = None
    calls: list[CallOut]


class UserList(BaseModel):
    count: int
    users: list[str]
