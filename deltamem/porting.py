"""Export a user's memory to a portable file, and import it into any store.

The file is JSON Lines, UTF-8, one JSON object a line:

1. a header: ``{"format": "deltamem-export", "version": 1, "user_id": ...,
   "exported_at": ..., "embedder": {"name": ..., "dim": ...}}``;
2. one ``{"kind": "session", ...}`` line per session of the log, in log order: the
   messages as sent, the session's status, error, tries and the operations it
   applied;
3. one ``{"kind": "memory", ...}`` line per memory: the live memory (content,
   type, keywords, event time, the session and turns it came from, its times and
   version) with its whole history (who changed it, when, from which session), and
   for a deleted memory (``"deleted": true``) the history alone;
4. one ``{"kind": "episode", ...}`` line per episode (a turn of a session, as the
   search tier holds it), without its vector;
5. ``{"kind": "end", "counts": {...}}``, so that a cut file is refused, not half
   read.

No vector is exported: an import embeds memories and episodes with the target's
embedder, so a file moves between stores of different embedders (and between
SQLite and PostgreSQL). The records carry no user id: the header names the user,
and an import writes them to that user or to the one it is given.

An import is idempotent: memories keep their ids and sessions their keys, and
what the target holds already is left as it is, so importing a file twice
changes nothing. Where a memory id of the file is another user's in the target
(a copy of a user imported beside the original, under another id), every memory
gets an id derived from the new user and the old id (the same ones at every
import). A file of another format
or version is refused before anything is written, as is a line that is not JSON
or not a record of this version (the error names the line).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import IO, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deltamem.embed.base import Embedder
from deltamem.episodes import embed_episodes, episode_id, index_logged_sessions
from deltamem.ids import InvalidId, check_session_key
from deltamem.store.base import SessionConflict, Store
from deltamem.store.users import ImportedMemory, users_of
from deltamem.types import (
    Episode,
    HistoryEntry,
    MemoryItem,
    MemoryType,
    Message,
    Operation,
    OpKind,
    Role,
    SearchFilters,
    SessionRecord,
    SessionStatus,
    utcnow,
)

FORMAT = "deltamem-export"
VERSION = 1
# memories embedded and written per transaction on import
BATCH = 256

Source = str | os.PathLike[str] | IO[str] | IO[bytes]
Dest = str | os.PathLike[str] | IO[str] | IO[bytes]


class ExportFormatError(ValueError):
    """A file that is not a deltamem export this version can read; `line` is the
    1-based line at fault, where there is one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


# --- the records -----------------------------------------------------------------------
class _Record(BaseModel):
    # fields a later writer adds are read past; a new kind of line is refused
    model_config = ConfigDict(extra="ignore")


class EmbedderInfo(_Record):
    name: str
    dim: int


class Header(_Record):
    format: str
    version: int
    user_id: str
    exported_at: datetime
    embedder: EmbedderInfo | None = None


class SessionLine(_Record):
    kind: Literal["session"] = "session"
    agent_id: str | None = None
    session_id: str
    timestamp: datetime
    messages: list[Message]
    content_hash: str
    status: SessionStatus
    error: str | None = None
    attempts: int = 0
    operations: list[Operation] | None = None
    # the expiry it gives the memories derived from it
    expires_at: datetime | None = None


class HistoryLine(_Record):
    op: OpKind
    old_content: str | None = None
    new_content: str | None = None
    session_id: str | None = None
    actor: str
    at: datetime


class MemoryLine(_Record):
    kind: Literal["memory"] = "memory"
    id: str
    deleted: bool = False
    agent_id: str | None = None
    content: str | None = None
    timestamp: datetime | None = None
    memory_type: MemoryType | None = None
    keywords: list[str] = Field(default_factory=list)
    session_id: str | None = None
    turns: list[int] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int = 1
    # a memory a later fact outdated: when, and by which memory
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    # when it stops being served (deltamem/expiry.py)
    expires_at: datetime | None = None
    history: list[HistoryLine] = Field(default_factory=list)


class EpisodeLine(_Record):
    kind: Literal["episode"] = "episode"
    agent_id: str | None = None
    session_id: str
    turn: int
    role: Role
    name: str | None = None
    content: str
    timestamp: datetime


class EndLine(_Record):
    kind: Literal["end"] = "end"
    counts: dict[str, int]


_KINDS: dict[str, type[_Record]] = {
    "session": SessionLine,
    "memory": MemoryLine,
    "episode": EpisodeLine,
    "end": EndLine,
}


@dataclass
class PortCounts:
    """What an export wrote, or what an import added and found there already."""

    sessions: int = 0
    memories: int = 0
    episodes: int = 0
    skipped_sessions: int = 0  # import: already in the target (same key and content)
    skipped_memories: int = 0  # import: already in the target (same id)
    user_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class UserExport:
    """A user's data read from a store, ready to be written as lines."""

    header: Header
    sessions: list[SessionLine] = field(default_factory=list)
    memories: list[MemoryLine] = field(default_factory=list)
    episodes: list[EpisodeLine] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "sessions": len(self.sessions),
            "memories": len(self.memories),
            "episodes": len(self.episodes),
        }

    def lines(self) -> Iterator[str]:
        """The file, a line at a time (each ending in a newline)."""
        yield _line(self.header.model_dump(mode="json"))
        for rec in [*self.sessions, *self.memories, *self.episodes]:
            yield _line(rec.model_dump(mode="json", exclude_none=False))
        yield _line(EndLine(counts=self.counts()).model_dump(mode="json"))


def _line(obj: dict[str, Any]) -> str:
    # ensure_ascii: no raw U+2028 or U+0085 in a line, which some readers split on
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n"


# --- export ---------------------------------------------------------------------------
def read_user(
    store: Store, embedder: Embedder | None, user_id: str, as_user: str | None = None
) -> UserExport:
    """Everything the store holds of the user (every agent), as export records;
    `as_user` is the user id the header gives (default: `user_id`)."""
    data = users_of(store)
    out = UserExport(
        header=Header(
            format=FORMAT,
            version=VERSION,
            user_id=as_user if as_user is not None else user_id,
            exported_at=utcnow(),
            embedder=EmbedderInfo(name=embedder.name, dim=embedder.dim) if embedder else None,
        )
    )
    for rec in store.list_sessions(user_id):
        ops = None
        if rec.status == "applied":
            ops = store.session_operations(user_id, rec.session_id, rec.agent_id)
        out.sessions.append(
            SessionLine(
                agent_id=rec.agent_id,
                session_id=rec.session_id,
                timestamp=rec.timestamp,
                messages=rec.messages,
                content_hash=rec.content_hash,
                status=rec.status,
                error=rec.error,
                attempts=rec.attempts,
                operations=ops,
                expires_at=rec.expires_at,
            )
        )
    histories: dict[str, list[HistoryLine]] = {}
    for h in data.user_history(user_id):
        histories.setdefault(h.memory_id, []).append(
            HistoryLine(
                op=h.op,
                old_content=h.old_content,
                new_content=h.new_content,
                session_id=h.session_id,
                actor=h.actor,
                at=h.at,
            )
        )
    live = store.list_memories(user_id, filters=SearchFilters(outdated=True, expired=True))
    for m in live:
        out.memories.append(
            # every field of the memory but its user, who is the file's
            MemoryLine(**m.model_dump(exclude={"user_id"}), history=histories.pop(m.id, []))
        )
    for memory_id, history in histories.items():  # deleted: their history is kept
        out.memories.append(MemoryLine(id=memory_id, deleted=True, history=history))
    for ep in data.user_episodes(user_id):
        out.episodes.append(
            EpisodeLine(
                agent_id=ep.agent_id,
                session_id=ep.session_id,
                turn=ep.turn,
                role=ep.role,
                name=ep.name,
                content=ep.content,
                timestamp=ep.timestamp,
            )
        )
    return out


def write_lines(lines: Iterable[str], dest: Dest) -> None:
    """Write the lines to a path (UTF-8) or to an open file, text or binary."""
    if isinstance(dest, (str, os.PathLike)):
        with open(dest, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(lines)
        return
    binary = isinstance(dest, (io.RawIOBase, io.BufferedIOBase)) or "b" in getattr(dest, "mode", "")
    for line in lines:
        dest.write(line.encode("utf-8") if binary else line)  # type: ignore[arg-type]


def export_user(store: Store, embedder: Embedder | None, user_id: str, dest: Dest) -> PortCounts:
    """Write the user's export file to `dest` (a path or an open file)."""
    data = read_user(store, embedder, user_id)
    write_lines(data.lines(), dest)
    counts = data.counts()
    return PortCounts(user_id=user_id, **counts)


# --- reading a file -------------------------------------------------------------------
def _text_lines(source: Source | list[str]) -> Iterator[str]:
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, encoding="utf-8", newline="") as f:
                yield from f
        except UnicodeDecodeError as exc:
            raise ExportFormatError(f"the file is not UTF-8 text: {exc}") from exc
        return
    for raw in source:
        if isinstance(raw, bytes):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ExportFormatError(f"the file is not UTF-8 text: {exc}") from exc
        else:
            yield raw


def parse_export(source: Source | list[str]) -> UserExport:
    """Read and check a whole export file; ExportFormatError (naming the line) for a
    file of another format or version, a line that is not JSON or not a record,
    or a file cut short."""
    lines = _text_lines(source)
    header: Header | None = None
    out: UserExport | None = None
    end: EndLine | None = None
    n = 0
    for n, text in enumerate(lines, 1):
        text = text.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ExportFormatError(f"not valid JSON: {exc.msg} (column {exc.colno})", n) from None
        if not isinstance(obj, dict):
            raise ExportFormatError(f"a {type(obj).__name__}, not a JSON object", n)
        if header is None:
            header = _header(obj, n)
            out = UserExport(header=header)
            continue
        if end is not None:
            raise ExportFormatError("a record after the end line", n)
        kind = obj.get("kind")
        model = _KINDS.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise ExportFormatError(
                f"unknown record kind {kind!r} (version {VERSION} has {', '.join(sorted(_KINDS))})",
                n,
            )
        try:
            rec = model.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ExportFormatError(f"{kind} record: {where}: {first['msg']}", n) from None
        assert out is not None
        if isinstance(rec, SessionLine):
            out.sessions.append(rec)
        elif isinstance(rec, MemoryLine):
            _check_memory(rec, n)
            out.memories.append(rec)
        elif isinstance(rec, EpisodeLine):
            out.episodes.append(rec)
        elif isinstance(rec, EndLine):
            end = rec
    if header is None or out is None:
        raise ExportFormatError("the file is empty: no deltamem export header")
    if end is None:
        raise ExportFormatError(f"the file ends at line {n} without its end line (cut short?)")
    if {k: end.counts.get(k, 0) for k in out.counts()} != out.counts():
        raise ExportFormatError(
            f"the end line counts {end.counts} but the file holds {out.counts()}"
        )
    return out


def _header(obj: dict[str, Any], n: int) -> Header:
    if obj.get("format") != FORMAT:
        raise ExportFormatError(
            f"not a deltamem export (its first line has format {obj.get('format')!r}, "
            f"expected {FORMAT!r})",
            n,
        )
    if obj.get("version") != VERSION:
        raise ExportFormatError(
            f"export format version {obj.get('version')!r} is not supported: this "
            f"deltamem reads version {VERSION}",
            n,
        )
    try:
        return Header.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ExportFormatError(f"header: {where}: {first['msg']}", n) from None


def _check_memory(rec: MemoryLine, n: int) -> None:
    if rec.deleted:
        return
    missing = [
        name
        for name in ("content", "timestamp", "created_at", "updated_at")
        if getattr(rec, name) is None
    ]
    if missing:
        raise ExportFormatError(f"memory {rec.id!r} has no {', '.join(missing)}", n)


# --- import ---------------------------------------------------------------------------
def _taken(store: Store, memories: list[MemoryLine], user_id: str) -> bool:
    """Whether a memory id of the file is another user's in the store."""
    ids = [m.id for m in memories]
    for i in range(0, len(ids), 1000):
        if any(m.user_id != user_id for m in store.get_many(ids[i : i + 1000])):
            return True
    for m in memories:
        if m.deleted:
            gone = store.history(m.id)
            if gone and gone[0].user_id not in (None, user_id):
                return True
    return False


def _id_mapper(target_user: str, keep: bool) -> Any:
    if keep:
        return lambda memory_id: memory_id

    def remap(memory_id: str) -> str:
        key = f"{target_user}\x1f{memory_id}".encode()
        return hashlib.sha256(key).hexdigest()[:32]

    return remap


def import_user(
    store: Store,
    embedder: Embedder,
    source: Source | UserExport,
    user_id: str | None = None,
) -> PortCounts:
    """Load an export file into the store, as `user_id` (default: the file's user),
    embedding its memories and episodes with `embedder`. The whole file is read and
    checked before anything is written. Memories whose id the store knows and
    sessions it has logged are left as they are (importing twice changes nothing).

    Memories keep their ids, unless one of them is another user's in the store (the
    file is imported beside the user it was exported from, under another id, or
    beside a tenant's user of the same name): then every memory gets an id derived
    from the target user and its old id, the same at every import."""
    data = users_of(store)
    parsed = source if isinstance(source, UserExport) else parse_export(source)
    target = user_id if user_id is not None else parsed.header.user_id
    for s in parsed.sessions:
        try:
            check_session_key(target, s.session_id, s.agent_id)
        except InvalidId as exc:
            raise ExportFormatError(f"session {s.session_id!r}: {exc}") from None
    for s in parsed.sessions:  # refused before anything is written
        known = store.get_session(target, s.session_id, s.agent_id)
        if known is not None and known.content_hash != s.content_hash:
            raise SessionConflict(
                f"session {s.session_id!r} of user {target!r} is already logged with "
                "different content; nothing was imported",
                user_id=target,
                session_id=s.session_id,
            )
    new_id = _id_mapper(target, keep=not _taken(store, parsed.memories, target))
    counts = PortCounts(user_id=target)
    # memories first: a session the import queues is planned against them
    for i in range(0, len(parsed.memories), BATCH):
        part = parsed.memories[i : i + BATCH]
        # a memory the store holds already is skipped without embedding it
        held = {m.id for m in store.get_many([new_id(m.id) for m in part if not m.deleted])}
        batch = [m for m in part if new_id(m.id) not in held]
        live = [m for m in batch if not m.deleted]
        vector_of: dict[str, np.ndarray] = {}
        if live:
            vectors = embedder.embed([m.content or "" for m in live])
            vector_of = {m.id: v for m, v in zip(live, vectors, strict=True)}
        added = data.import_memories(
            [_imported(m, target, new_id, vector_of.get(m.id)) for m in batch]
        )
        counts.memories += added
        counts.skipped_memories += len(part) - added
    episodes: dict[tuple[str | None, str], list[EpisodeLine]] = {}
    for e in parsed.episodes:
        episodes.setdefault((e.agent_id, e.session_id), []).append(e)
    logged: list[SessionLine] = []
    for s in parsed.sessions:
        rec = SessionRecord(
            user_id=target,
            agent_id=s.agent_id,
            session_id=s.session_id,
            timestamp=s.timestamp,
            messages=s.messages,
            content_hash=s.content_hash,
            # out of the queue until its state is restored below
            status="deferred",
            expires_at=s.expires_at,
        )
        if store.get_session(target, s.session_id, s.agent_id) is not None:
            store.log_session(rec)  # SessionConflict if it holds something else
            counts.skipped_sessions += 1
            logged.append(s)
            continue
        turns = [
            Episode(
                id=episode_id(target, e.agent_id, e.session_id, e.turn),
                user_id=target,
                agent_id=e.agent_id,
                session_id=e.session_id,
                turn=e.turn,
                role=e.role,
                name=e.name,
                content=e.content,
                timestamp=e.timestamp,
            )
            for e in episodes.get((s.agent_id, s.session_id), [])
        ]
        planned = embed_episodes(turns, embedder) if turns else None
        _, created = store.log_session(rec, planned)
        counts.sessions += created
        counts.episodes += len(turns) if created else 0
        logged.append(s)
    for s in logged:
        ops = None
        if s.operations is not None:
            ops = [
                o.model_copy(update={"memory_id": new_id(o.memory_id)}) if o.memory_id else o
                for o in s.operations
            ]
        data.restore_session(
            target,
            s.session_id,
            s.agent_id,
            status=s.status,
            error=s.error,
            attempts=s.attempts,
            operations=ops,
        )
    # a session whose turns the file left out is indexed from its messages
    index_logged_sessions(store, embedder)
    return counts


def _imported(m: MemoryLine, user_id: str, new_id: Any, vector: Any) -> ImportedMemory:
    mid = new_id(m.id)
    history = [
        HistoryEntry(
            memory_id=mid,
            op=h.op,
            old_content=h.old_content,
            new_content=h.new_content,
            session_id=h.session_id,
            actor=h.actor,
            at=h.at,
            user_id=user_id,
        )
        for h in m.history
    ]
    if m.deleted:
        return ImportedMemory(mid, user_id, None, None, history)
    assert m.content is not None and m.timestamp is not None
    assert m.created_at is not None and m.updated_at is not None
    # every field the file carries for it (a field added to MemoryItem and to
    # MemoryLine travels without a line here), under the id and user it is imported as
    fields = m.model_dump(include=set(MemoryItem.model_fields) - {"id", "user_id"})
    item = MemoryItem(id=mid, user_id=user_id, **fields)
    return ImportedMemory(mid, user_id, item, vector, history)
