"""What the SQLite and PostgreSQL stores do alike, whatever their SQL dialect: the
migration scripts in order, the checks before a write, what a write puts in the
memory row, the operation it reports and the history row it leaves, a session's
writes read back, and the row a model call is logged as."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import numpy as np

from deltamem.llm.base import CallRecord
from deltamem.store.base import PlannedWrite, SessionConflict, StoreError
from deltamem.store.rows import Row, stored_agent
from deltamem.types import Operation, SessionRecord

# the llm_calls columns `call_values` fills, in its order
CALL_COLUMNS = (
    "at, model, purpose, prompt_tokens, completion_tokens, cached_tokens, seconds, ok, "
    "error, reply, user_id, agent_id, session_id"
)

# the history columns, in the order `history_row` gives them
HISTORY_COLUMNS = "memory_id, user_id, op, old_content, new_content, session_id, actor, at"


def expiry_text(at: datetime | None) -> str | None:
    """An expiry as the SQLite store keeps it: ISO 8601 in UTC with microseconds, so
    that comparing the texts compares the instants."""
    return None if at is None else at.astimezone(UTC).isoformat(timespec="microseconds")


def migration_scripts(package: str) -> list[tuple[int, str]]:
    """(version, SQL) of each script in a migrations package, oldest first; a script's
    name starts with its version (`003_episodes.sql`)."""
    scripts = sorted(
        (p for p in resources.files(package).iterdir() if p.name.endswith(".sql")),
        key=lambda p: p.name,
    )
    return [(int(p.name.split("_", 1)[0]), p.read_text()) for p in scripts]


def check_embedding(embedding: np.ndarray, dim: int, *, finite: bool = False) -> None:
    """Refuse an embedding of another shape than the store's, and with `finite` one
    holding NaN or infinite values (pgvector refuses them)."""
    if embedding.shape != (dim,):
        raise StoreError(f"embedding of shape {embedding.shape}, expected {dim}")
    if finite and not np.isfinite(embedding).all():
        raise StoreError("embedding holds NaN or infinite values")


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix`, in code point
    order (which is UTF-8 byte order, SQLite's BINARY collation), so that
    `prefix <= id < prefix_end(prefix)` holds exactly for the ids that start with
    `prefix` and an index can find them; None if no string is above them all."""
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            nxt = 0xE000 if 0xD800 <= last + 1 <= 0xDFFF else last + 1  # no surrogates
            return prefix[:-1] + chr(nxt)
        prefix = prefix[:-1]
    return None


def check_unapplied(state: Row | None, session: SessionRecord) -> None:
    """Refuse to apply a session missing from the log (`state` is its row: status and
    content_hash) or applied. A row of other content is not this session: it was
    cancelled while planned, and logged again with the same id."""
    session_id = session.session_id
    if state is None or state["content_hash"] != session.content_hash:
        raise StoreError(f"session {session_id!r} is not in the log")
    if state["status"] == "applied":
        raise StoreError(f"session {session_id!r} is already applied")


def conflict(rec: SessionRecord) -> SessionConflict:
    return SessionConflict(
        f"session {rec.session_id!r} of user {rec.user_id!r} is already logged "
        "with different content; give the new session its own id",
        user_id=rec.user_id,
        session_id=rec.session_id,
    )


def added(memory_id: str, w: PlannedWrite) -> Operation:
    return Operation(
        op="add", memory_id=memory_id, content=w.content, memory_type=w.memory_type, turns=w.turns
    )


def updated(w: PlannedWrite, old_content: str) -> Operation:
    """The update `w` made of a memory that held `old_content` (`w.memory_type` is the
    type the memory has now)."""
    return Operation(
        op="update",
        memory_id=w.memory_id,
        content=w.content,
        old_content=old_content,
        memory_type=w.memory_type,
        turns=w.turns,
    )


def invalidated(memory_id: str, content: str, by: str | None, rule: str | None) -> Operation:
    """The marking of a memory that held `content` as no longer holding, by memory
    `by` (the history row keeps the content on both sides: nothing was rewritten)."""
    return Operation(
        op="invalidate",
        memory_id=memory_id,
        content=content,
        old_content=content,
        note=f"outdated by {by}" if by else "outdated",
        rule=rule,
    )


def written_values(
    session: SessionRecord, w: PlannedWrite, encode_list: Callable[[list], object]
) -> tuple[object, ...]:
    """What an add or update sets in the memory row from the session and the write, in
    this order: content, ts, timestamp, memory_type, keywords, session_id, turns (the
    lists as the backend stores them)."""
    return (
        w.content,
        session.timestamp.timestamp(),
        session.timestamp.isoformat(),
        w.memory_type or "",
        encode_list(w.keywords),
        session.session_id,
        encode_list(w.turns),
    )


def history_row(op: Operation, session: SessionRecord, at: object) -> tuple[object, ...]:
    """The history row (HISTORY_COLUMNS) of an add or update the manager applied for
    `session`."""
    return (
        op.memory_id,
        session.user_id,
        op.op,
        op.old_content,
        op.content,
        session.session_id,
        "manager",
        at,
    )


def read_session_writes(
    read: Callable[[str, list[Any]], Sequence[Row]],
    mark: str,
    session_id: str,
    user_id: str | None,
) -> dict[str, str]:
    """Store.session_writes over `read`, in a dialect whose placeholder is `mark`."""
    sql = f"""SELECT memory_id, new_content FROM history WHERE session_id={mark}
              AND op IN ('add','update')"""
    params: list[Any] = [session_id]
    if user_id is not None:
        sql += f" AND user_id={mark}"
        params.append(user_id)
    written: dict[str, str] = {}
    for r in read(sql + " ORDER BY id", params):
        written[r["memory_id"]] = r["new_content"]  # the session's last word on it
    return written


def call_values(rec: CallRecord, at: object, ok: object) -> tuple[object, ...]:
    """A model call's llm_calls row (CALL_COLUMNS), with its instant and outcome as the
    backend stores them; the agent is recorded only for a call made for a session."""
    return (
        at,
        rec.model,
        rec.purpose,
        rec.prompt_tokens,
        rec.completion_tokens,
        rec.cached_tokens,
        rec.seconds,
        ok,
        rec.error,
        rec.reply,
        rec.user_id,
        None if rec.session_id is None else stored_agent(rec.agent_id),
        rec.session_id,
    )
