"""Bulk ingestion: many sessions logged at once (`Memory.add_many`, `deltamem
import-sessions`), without processing them here.

Sessions are read a batch at a time: each is validated as `Memory.log_session`
validates it (a bad one is reported with its position and the others are kept), the
turns of the new ones are embedded in one embedder call for the whole batch, and each
session is then logged in its own transaction with its turns indexed, so a run
stopped anywhere leaves whole sessions behind and runs again from where it stopped.
With `infer` the sessions are queued (pending) for the workers, which apply them at
the speed the workers (and their model) have; without, they are stored verbatim
(deferred), their turns searchable at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deltamem.episodes import embed_episodes, session_episodes
from deltamem.store.base import PlannedEpisode, SessionConflict
from deltamem.types import SessionRecord

if TYPE_CHECKING:
    from deltamem.memory import Memory

SessionKey = tuple[str, str | None, str]


@dataclass
class BulkResult:
    """What `add_many` did: sessions logged now, those logged before (the same
    content, or with `resume` the same key), and the ones refused, as (position in
    the input, 0-based; why)."""

    logged: int = 0
    already: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def seen(self) -> int:
        return self.logged + self.already + len(self.errors)


def _fields(item: Mapping[str, Any] | Sequence[Any], user_id: str | None) -> dict[str, Any]:
    """The keyword arguments of `Memory.session_record` that a session item gives."""
    if not isinstance(item, Mapping):
        item = {"messages": item}
    if "messages" not in item:
        raise ValueError("the session has no 'messages'")

    def text(key: str) -> str | None:
        v = item.get(key)
        return None if v is None else str(v)

    uid = text("user_id") or user_id
    if not uid:
        raise ValueError("no user_id in the session and no user given")
    return {
        "messages": item["messages"],
        "user_id": uid,
        "session_id": text("session_id"),
        "agent_id": text("agent_id"),
        "timestamp": text("timestamp"),
        "expires_at": text("expires_at"),
    }


def add_many(
    memory: Memory,
    sessions: Iterable[Mapping[str, Any] | Sequence[Any]],
    *,
    user_id: str | None = None,
    infer: bool = True,
    resume: bool = False,
    batch: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> BulkResult:
    """See `Memory.add_many`. `on_progress(n)` is called after each batch with the
    sessions it went through."""
    result = BulkResult()
    chunk: list[tuple[int, Mapping[str, Any] | Sequence[Any]]] = []
    for n, item in enumerate(sessions):
        chunk.append((n, item))
        if len(chunk) >= max(1, batch):
            _ingest(memory, chunk, user_id, infer, resume, result)
            if on_progress is not None:
                on_progress(len(chunk))
            chunk = []
    if chunk:
        _ingest(memory, chunk, user_id, infer, resume, result)
        if on_progress is not None:
            on_progress(len(chunk))
    return result


def _ingest(
    memory: Memory,
    chunk: list[tuple[int, Mapping[str, Any] | Sequence[Any]]],
    user_id: str | None,
    infer: bool,
    resume: bool,
    result: BulkResult,
) -> None:
    store = memory.store
    new: list[tuple[int, SessionRecord]] = []
    hashes: dict[SessionKey, str] = {}  # the batch's new sessions, by key
    for n, item in chunk:
        try:
            rec = memory.session_record(**_fields(item, user_id), infer=infer)
        except ValueError as exc:  # InvalidSession names the fault
            result.errors.append((n, str(exc)))
            continue
        key = (rec.user_id, rec.agent_id, rec.session_id)
        earlier = hashes.get(key)
        if earlier is None:
            known = store.get_session(rec.user_id, rec.session_id, rec.agent_id)
            earlier = known.content_hash if known is not None else None
        if earlier is None:
            hashes[key] = rec.content_hash
            new.append((n, rec))
        elif resume or earlier == rec.content_hash:
            result.already += 1
        else:
            result.errors.append(
                (
                    n,
                    f"session {rec.session_id!r} of user {rec.user_id!r} is already logged "
                    "with different content; give the new session its own id",
                )
            )
    # every new session's turns in one embedder call, shortest first: the embedder's
    # batches are padded to their longest text, so like lengths go together
    turns = [session_episodes(rec) for _, rec in new]
    flat = [e for t in turns for e in t]
    order = sorted(range(len(flat)), key=lambda i: len(flat[i].content))
    embedded = dict(
        zip(order, embed_episodes([flat[i] for i in order], memory.embedder), strict=True)
    )
    planned = [embedded[i] for i in range(len(flat))]
    at = 0
    for (n, rec), its in zip(new, turns, strict=True):
        episodes: list[PlannedEpisode] = planned[at : at + len(its)]
        at += len(its)
        try:
            _, created = store.log_session(rec, episodes)
        except SessionConflict as exc:  # logged meanwhile by another process
            result.errors.append((n, str(exc)))
            continue
        if created:
            result.logged += 1
        else:
            result.already += 1
