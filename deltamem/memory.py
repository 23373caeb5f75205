"""`Memory`: the library's front door. Three lines to a memory that stays right.

    mem = Memory()
    mem.add(messages, user_id="martin", session_id="s1", timestamp="2029-02-13T10:51:39")
    mem.search("Which films does Martin like?", user_id="martin")

Write path: validate the session, log it durably, let the manager plan the
operations, then apply them in one transaction. A crash or an LLM failure
between logging and applying leaves the session pending/failed in the log, never
half-applied; `process_pending()` (or adding again) picks it up.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir
from pydantic import ValidationError

from deltamem import bulk
from deltamem.answer import Answer, Answerer
from deltamem.bulk import BulkResult
from deltamem.embed import Embedder, make_embedder
from deltamem.episodes import fact_turns, index_logged_sessions, plan_episodes
from deltamem.expiry import ExpiryConfig, parse_expiry
from deltamem.ids import InvalidId, check_session_key
from deltamem.llm import LLM, CallRecord, LLMConfig, LLMError, make_llm
from deltamem.llm.base import call_scope
from deltamem.manager.agent import Manager, ManagerConfig
from deltamem.porting import Dest, PortCounts, Source, export_user, import_user
from deltamem.provenance import PERSON, check_content, timeline
from deltamem.retrieval.hybrid import HybridSearcher, Tiers
from deltamem.store.base import PlannedWrite, Store
from deltamem.store.users import users_of
from deltamem.superseded import OutdatedCache, without_superseded
from deltamem.text import keywords
from deltamem.timeparse import parse_time
from deltamem.types import (
    AddResult,
    HistoryEntry,
    MemoryItem,
    Message,
    Operation,
    SearchFilters,
    SearchHit,
    SessionRecord,
    SessionStatus,
    Version,
    utcnow,
)

MAX_SESSION_MESSAGES = 2000
# hits searched beyond `limit` for `context`, so that the excerpts it leaves out
# (superseded) are made up for
SUPERSEDED_SPARE = 10


class InvalidSession(ValueError):
    """The session given to `add` cannot be read; nothing was stored."""


class SessionFailed(RuntimeError):
    """The session is logged but could not be processed; it is marked failed and can
    be retried with `Memory.retry` / `deltamem retry`."""


def default_path() -> Path:
    home = os.environ.get("DELTAMEM_HOME") or user_data_dir("deltamem")
    return Path(home) / "memory.db"


def open_store(path: str | Path | None, embedder: Embedder) -> Store:
    """A SQLite file by default; a postgresql:// URL opens the PostgreSQL store."""
    if isinstance(path, str) and path.startswith(("postgresql://", "postgres://")):
        from deltamem.store.postgres import PostgresStore

        return PostgresStore(path, dim=embedder.dim, embedder_name=embedder.name)
    from deltamem.store.sqlite import SQLiteStore

    return SQLiteStore(path or default_path(), dim=embedder.dim, embedder_name=embedder.name)


def parse_messages(messages: Any) -> list[Message]:
    """Validate raw messages into Message objects, or raise InvalidSession naming the fault."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidSession("messages must be a list of {role, content, timestamp?} objects")
    if not messages:
        raise InvalidSession("the session has no messages")
    if len(messages) > MAX_SESSION_MESSAGES:
        raise InvalidSession(
            f"the session has {len(messages)} messages (limit {MAX_SESSION_MESSAGES}); split it"
        )
    out: list[Message] = []
    for i, raw in enumerate(messages):
        if isinstance(raw, Message):
            out.append(raw)
            continue
        if not isinstance(raw, dict):
            raise InvalidSession(f"message {i} is a {type(raw).__name__}, not an object")
        content = raw.get("content")
        if isinstance(content, bytes):
            try:
                raw = {**raw, "content": content.decode("utf-8")}
            except UnicodeDecodeError as exc:
                raise InvalidSession(f"message {i} is not valid UTF-8: {exc}") from exc
        elif isinstance(content, str):
            try:
                content.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidSession(
                    f"message {i} contains text that is not valid Unicode "
                    f"(lone surrogate at character {exc.start})"
                ) from exc
        try:
            out.append(Message.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidSession(f"message {i}: {where}: {first['msg']}") from exc
    return out


def session_hash(messages: list[Message], timestamp: datetime | None) -> str:
    payload = json.dumps(
        [[m.role, m.name, m.content] for m in messages]
        + [timestamp.isoformat() if timestamp else None],
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Memory:
    """A memory of the people an agent talks with.

    Everything is optional: by default the store is one SQLite file in the user
    data directory (or $DELTAMEM_HOME), the LLM is the embedded llama.cpp model
    and the embedder the embedded MiniLM. The LLM is loaded on first use, so
    reading memory never pays for it. `adapter`: a GGUF LoRA file (`deltamem train
    export`) that llama.cpp applies to the model, e.g. `Memory(llm="local",
    adapter="manager.gguf")`. `expiry`: TTLs per memory type (default: from
    $DELTAMEM_TTL_EVENT and the like; none set, nothing expires).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        llm: LLM | LLMConfig | str | None = None,
        embedder: Embedder | str | None = None,
        store: Store | None = None,
        config: ManagerConfig | None = None,
        log_calls: bool = True,
        adapter: str | Path | None = None,
        expiry: ExpiryConfig | None = None,
    ) -> None:
        if adapter is not None:  # a GGUF LoRA for the llama.cpp model the spec names
            if isinstance(llm, LLM):
                raise ValueError("adapter= applies to an LLM spec or LLMConfig, not a built LLM")
            base = llm if isinstance(llm, LLMConfig) else LLMConfig(llm)
            llm = dataclasses.replace(base, adapter=os.fspath(adapter))
        self.embedder = embedder if isinstance(embedder, Embedder) else make_embedder(embedder)
        if store is None:
            store = open_store(path, self.embedder)
        self.store = store
        self.config = config or ManagerConfig.from_env()
        # TTLs per memory type (deltamem/expiry.py): none unless configured
        self.expiry = expiry if expiry is not None else ExpiryConfig.from_env()
        self._llm_spec = llm
        self._llm: LLM | None = llm if isinstance(llm, LLM) else None
        self._llm_lock = threading.Lock()
        self._log_calls = log_calls
        self._call_listeners: list[Callable[[CallRecord], None]] = []
        if self._llm is not None and log_calls:
            self._llm.on_call(self.store.log_call)
        self.searcher = HybridSearcher(self.store, self.embedder)
        # sessions logged without their turns (by the REST API, then a kill -9; or in a
        # store from before the episode tier): index them now (one the embedder fails
        # on is left for a worker's next pass)
        index_logged_sessions(self.store, self.embedder)

    # --- lazily built parts ----------------------------------------------------------
    @property
    def llm(self) -> LLM:
        if self._llm is None:
            with self._llm_lock:  # two threads' first calls must not load two models
                if self._llm is None:
                    spec = None if isinstance(self._llm_spec, LLM) else self._llm_spec
                    llm = make_llm(spec)
                    if self._log_calls:
                        llm.on_call(self.store.log_call)
                    for listener in self._call_listeners:
                        llm.on_call(listener)
                    self._llm = llm
        return self._llm

    def on_call(self, listener: Callable[[CallRecord], None]) -> None:
        """Call `listener` with the record of every model call (the LLM's, whenever it
        is built), e.g. for metrics."""
        with self._llm_lock:
            self._call_listeners.append(listener)
            if self._llm is not None:
                self._llm.on_call(listener)

    @property
    def manager(self) -> Manager:
        return Manager(self.llm, self.embedder, self.store, self.config)

    # --- write path ------------------------------------------------------------------
    def add(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        expires_at: str | datetime | None = None,
    ) -> AddResult:
        """Ingest one dialogue session and return the operations applied.

        Event time is `timestamp`, else the first message's timestamp, else now.
        Adding a session id again with the same content returns its recorded
        operations without calling the LLM.

        `infer=False` stores the session verbatim: it is logged and its turns are
        searchable at once (the "episode" tier), with no LLM call; it stays
        "deferred" (result status) until `process_pending()`, `retry()` or adding it
        again with inference turns it into facts.

        `expires_at`: when the memories derived from it stop being served (over the
        TTL of their type; deltamem/expiry.py), whenever they are derived.
        """
        record = self.log_session(
            messages,
            user_id=user_id,
            session_id=session_id,
            timestamp=timestamp,
            agent_id=agent_id,
            infer=infer,
            expires_at=expires_at,
        )
        if not infer and record.status != "applied":
            return AddResult(session_id=record.session_id, status=record.status)
        # a user's sessions apply in order: finish earlier pending ones first
        for earlier in self.store.list_sessions(user_id, status="pending"):
            if earlier.seq < record.seq and earlier.agent_id == record.agent_id:
                self._process(earlier)
        return self._process(record)

    def log_session(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        expires_at: str | datetime | None = None,
        index: bool = True,
    ) -> SessionRecord:
        """Validate and durably log a session without processing it (queue semantics).
        With `infer=False` it is logged "deferred": out of the queue until requeued.
        With `index=False` its turns are not embedded now: the session is logged
        unindexed, and `index_logged()` (which a worker runs before it processes
        anything, and which runs whenever a Memory opens the store) indexes it later;
        a big session is then logged in the time it takes to write it."""
        rec = self.session_record(
            messages,
            user_id=user_id,
            session_id=session_id,
            timestamp=timestamp,
            agent_id=agent_id,
            infer=infer,
            expires_at=expires_at,
        )
        known = self.store.get_session(rec.user_id, rec.session_id, rec.agent_id)
        # its turns are indexed as episodes in the log entry's own transaction (a
        # session already logged is indexed already: nothing is embedded twice)
        episodes = plan_episodes(rec, self.embedder) if known is None and index else []
        stored, _ = self.store.log_session(rec, episodes if index else None)
        return stored

    def session_record(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        agent_id: str | None = None,
        infer: bool = True,
        expires_at: str | datetime | None = None,
    ) -> SessionRecord:
        """The log entry `log_session` would write, validated, without writing it
        (InvalidSession naming the fault)."""
        try:
            check_session_key(user_id, session_id, agent_id)  # deltamem/ids.py: the grammar
        except InvalidId as exc:
            raise InvalidSession(str(exc)) from exc
        msgs = parse_messages(messages)
        try:
            ts = parse_time(timestamp) if timestamp is not None else None
        except ValueError as exc:
            raise InvalidSession(str(exc)) from exc
        ts = ts or next((m.timestamp for m in msgs if m.timestamp), None)
        # a session without any time is identified by its messages alone, so that adding
        # it again finds it instead of conflicting with it (its event time is then now)
        digest = session_hash(msgs, ts)
        ts = ts or utcnow()
        try:
            expiry = parse_expiry(expires_at) if expires_at is not None else None
        except ValueError as exc:
            raise InvalidSession(f"expires_at: {exc}") from exc
        return SessionRecord(
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id or digest[:16],
            timestamp=ts,
            messages=msgs,
            content_hash=digest,
            status="pending" if infer else "deferred",
            expires_at=expiry,
        )

    def add_many(
        self,
        sessions: Iterable[Mapping[str, Any] | Sequence[Any]],
        *,
        user_id: str | None = None,
        infer: bool = True,
        resume: bool = False,
        batch: int = 64,
        on_progress: Callable[[int], None] | None = None,
    ) -> BulkResult:
        """Log many sessions fast, without processing them (deltamem/bulk.py): each a
        mapping as `deltamem add` reads one ({user_id?, session_id?, agent_id?,
        timestamp?, expires_at?, messages}) or a bare list of messages. With `infer`
        they are queued for the workers (`process_pending()` or `deltamem worker`);
        without, stored verbatim (deferred). A bad session is reported in the
        result (its position) and the others are kept. `resume`: a session whose key
        is logged already is skipped without comparing its content."""
        return bulk.add_many(
            self,
            sessions,
            user_id=user_id,
            infer=infer,
            resume=resume,
            batch=batch,
            on_progress=on_progress,
        )

    def index_logged(self, stop: Callable[[], bool] | None = None) -> int:
        """Index the turns of the logged sessions that are not indexed yet (logged
        with `index=False`, or before the episode tier), each session in its own
        transaction; returns how many. `stop` is asked between sessions."""
        return index_logged_sessions(self.store, self.embedder, stop=stop)

    def _process(self, record: SessionRecord) -> AddResult:
        if record.status == "applied":
            ops = self.store.session_operations(record.user_id, record.session_id, record.agent_id)
            return AddResult(
                session_id=record.session_id,
                status="applied",
                operations=ops,
                already_applied=True,
            )
        before = self.llm.usage.snapshot()
        try:
            # the call log names the session each call served (the inspector shows them)
            with call_scope(record.user_id, record.session_id, record.agent_id):
                plan = self.manager.plan(record)
        except LLMError as exc:
            self.store.mark_failed(record.user_id, record.session_id, record.agent_id, str(exc))
            raise SessionFailed(
                f"session {record.session_id!r}: {exc}. It is kept in the log as failed; "
                "retry with `deltamem retry` or Memory.retry()"
            ) from exc
        self._give_expiry(record, plan.writes)
        ops = self.store.apply_session(record, plan.writes, plan.noops)
        used = self.llm.usage.since(before)
        cost = {
            **plan.stats,
            "prompt_tokens": used.prompt_tokens,
            "cached_tokens": used.cached_tokens,
            "completion_tokens": used.completion_tokens,
            "llm_seconds": round(used.seconds, 3),
        }
        return AddResult(session_id=record.session_id, status="applied", operations=ops, cost=cost)

    def _give_expiry(self, record: SessionRecord, writes: list[PlannedWrite]) -> None:
        """Each write's expiry: the session's, else the TTL of its type from the
        session's event time (an update without a type: the memory's type)."""
        if record.expires_at is None and not self.expiry.ttl:
            return
        for w in writes:
            if w.expires_at is not None:
                continue
            if record.expires_at is not None:
                w.expires_at = record.expires_at
                continue
            kind = w.memory_type
            if kind is None and w.op == "update" and w.memory_id:
                current = self.store.get(w.memory_id)
                kind = current.memory_type if current is not None else None
            w.expires_at = self.expiry.expires_at(kind, record.timestamp)

    def process_pending(self, user_id: str | None = None) -> list[AddResult]:
        """Apply every logged session still waiting, in log order: those pending
        (resume after a crash) and those added with `infer=False` (deferred)."""
        waiting = ("pending", "deferred")
        return [self._process(r) for r in self.store.list_sessions(user_id) if r.status in waiting]

    def retry(self, session_id: str, *, user_id: str, agent_id: str | None = None) -> AddResult:
        rec = self.store.get_session(user_id, session_id, agent_id)
        if rec is None:
            raise KeyError(f"no session {session_id!r} for user {user_id!r}")
        return self._process(rec)

    def cancel(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> SessionStatus | None:
        """Withdraw a logged session that is not applied (pending, deferred or failed)
        from the log, with its episodes and model calls: no memory comes of it. A
        worker planning it meanwhile has its apply refused and drops the result.
        Returns the status it had ("applied": left as it is; None: no such session)."""
        return self.store.cancel_session(user_id, session_id, agent_id)

    def replay(self, user_id: str, agent_id: str | None = None) -> list[AddResult]:
        """Rebuild a user's memory from the session log with the current manager."""
        self.store.reset(user_id, agent_id, keep_log=True)
        # the sessions it had applied (deferred ones stay deferred)
        return [self._process(r) for r in self.store.list_sessions(user_id, status="pending")]

    # --- read path -------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        """Facts and episodes (raw turns of the session log), fused into one ranking;
        each hit says its `kind`. `tiers="facts"` searches the memory bank alone."""
        if isinstance(filters, dict):
            filters = SearchFilters.model_validate(filters)
        return self.searcher.search(
            query, user_id, limit=limit, agent_id=agent_id, filters=filters, tiers=tiers
        )

    def answer(
        self,
        question: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 20,
        asked_at: str | datetime | None = None,
        tiers: Tiers = "all",
    ) -> Answer:
        hits = self.context(question, user_id=user_id, limit=limit, agent_id=agent_id, tiers=tiers)
        at = parse_time(asked_at) if asked_at is not None else None
        # the call log names the user (its reply quotes their memories): forgotten with them
        with call_scope(user_id, None, agent_id):
            return Answerer(self.llm, rules=self.config.rules).answer(question, hits, asked_at=at)

    def context(
        self,
        question: str,
        *,
        user_id: str,
        limit: int = 20,
        agent_id: str | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        """What `answer` reads. With every tier (the default): the `limit` raw turns
        a plain search over the turns finds, ranked as the `retrieval` baseline
        ranks them, and beside them what the best `limit // 2` facts give
        (`ManagerConfig.beside`): the turns they were written from ("turns", the
        default), the facts ("facts"), or both. What is beside adds to what raw
        search would show and takes no turn's place (`HybridSearcher.beside`). With
        one tier: `search`'s hits. Either way less
        the excerpts whose facts later facts outdated (deltamem/superseded.py, rule
        OUTDATED_EXCERPT), made up from further down; an outdated fact is out of
        search already (`invalid_at`)."""
        rules = self.config.rules
        if tiers == "all":
            hits = self.searcher.beside(
                question,
                user_id,
                limit=limit + SUPERSEDED_SPARE,
                facts=limit // 2 if self.config.beside_facts is None else self.config.beside_facts,
                agent_id=agent_id,
            )
            read: OutdatedCache = {}  # the raw turns and the led ones share sessions
            kept = without_superseded(self.store, hits, rules, read)
            turns = [h for h in kept if h.kind == "episode"][:limit]
            facts = [h for h in kept if h.kind == "fact"]
            if self.config.beside == "facts":
                return turns + facts
            led = fact_turns(self.store, facts, turns)
            led = without_superseded(self.store, led, rules, read)
            return turns + led + (facts if self.config.beside == "both" else [])
        hits = self.search(question, user_id=user_id, limit=limit, agent_id=agent_id, tiers=tiers)
        kept = without_superseded(self.store, hits, rules)
        if len(kept) < len(hits):
            # made up from further down the ranking (searched again: the fused
            # ranking of a longer list differs, so the first search is kept as is
            # where nothing was left out)
            more = self.search(
                question,
                user_id=user_id,
                limit=limit + SUPERSEDED_SPARE,
                agent_id=agent_id,
                tiers=tiers,
            )
            seen = {h.memory.id for h in hits}
            extra = [
                h for h in without_superseded(self.store, more, rules) if h.memory.id not in seen
            ]
            kept += extra[: limit - len(kept)]
        return kept

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        if isinstance(filters, dict):
            filters = SearchFilters.model_validate(filters)
        return self.store.list_memories(user_id, agent_id, filters, limit)

    def get(self, memory_id: str) -> MemoryItem | None:
        return self.store.get(memory_id)

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self.store.history(memory_id)

    def session_memories(self, session_id: str, user_id: str | None = None) -> list[MemoryItem]:
        return self.store.session_memories(session_id, user_id)

    def session_operations(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        return self.store.session_operations(user_id, session_id, agent_id)

    def timeline(self, memory_id: str) -> list[Version]:
        """Every version of a memory (add, updates, delete), oldest first, each with
        the session and turns it came from; empty for an unknown id."""
        return timeline(self.store, memory_id)

    def session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        """A logged session: its messages, status, error and tries."""
        return self.store.get_session(user_id, session_id, agent_id)

    def sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        """The session log in arrival order, optionally one user's or one status."""
        return self.store.list_sessions(user_id, status)

    def session_calls(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        """The LLM calls made for a session, every try of it, with their raw replies."""
        return self.store.session_calls(user_id, session_id, agent_id)

    def users(self, prefix: str = "") -> list[str]:
        """The ids of the users this memory holds (those starting with `prefix`)."""
        return self.store.list_users(prefix)

    def edit(self, memory_id: str, content: str, *, actor: str = PERSON) -> MemoryItem | None:
        """Correct a memory by hand: a new version with `content`, recorded in its
        history as an update by `actor` ("person": edited by a person), never a silent
        overwrite. None if there is no such memory; `InvalidEdit` for unusable text."""
        text = check_content(content)
        current = self.store.get(memory_id)
        if current is None:
            return None
        if text == current.content:
            return current  # nothing to record
        vector = self.embedder.embed_one(text)
        if self.store.edit(memory_id, text, vector, keywords(text), actor) is None:
            return None
        return self.store.get(memory_id)

    def set_expiry(self, memory_id: str, expires_at: str | datetime | None) -> MemoryItem | None:
        """Set when a memory stops being served (None: never); from then on it leaves
        search, get_all and answers, and `sweep_expired` deletes it. Its content and
        history are unchanged. None if there is no such memory; ValueError for an
        unreadable time."""
        at = parse_expiry(expires_at) if expires_at is not None else None
        if not self.store.set_expiry(memory_id, at):
            return None
        return self.store.get(memory_id)

    def sweep_expired(
        self, user_id: str | None = None, *, now: str | datetime | None = None
    ) -> list[MemoryItem]:
        """Delete for good the memories whose expiry has passed (at `now`, default the
        present), every user's or one user's, each with a `delete` by actor "expiry"
        in its history. Returns them as they were."""
        at = parse_time(now) if now is not None else utcnow()
        return self.store.sweep_expired(at, user_id)

    def delete(self, memory_id: str, *, actor: str = "api") -> bool:
        """Delete a memory on the application's request (logged in its history, with
        `actor`: "person" for a delete made by hand)."""
        return self.store.delete(memory_id, actor=actor)

    def reset(self, user_id: str, agent_id: str | None = None) -> int:
        """Forget a user entirely (`forget`); with `agent_id`, only the memories,
        history and session log kept for that agent. Returns the memories removed."""
        if agent_id is None:
            return self.forget(user_id)["memories"]
        return self.store.reset(user_id, agent_id)

    def forget(self, user_id: str) -> dict[str, int]:
        """Remove everything of the user from the store: session log (the job queue),
        memories, history, episodes, keyword index rows, model calls, leases and
        cached banks. Returns the rows removed by kind (sessions, memories, history,
        episodes, calls, leases)."""
        return users_of(self.store).forget_user(user_id)

    # --- export and import --------------------------------------------------------------
    def export_user(self, user_id: str, dest: Dest) -> PortCounts:
        """Write everything of the user (every agent) to `dest`, a path or an open
        file, as a portable JSON Lines file (deltamem/porting.py): the session log,
        each memory with its whole history, the episodes, no vectors."""
        return export_user(self.store, self.embedder, user_id, dest)

    def import_user(self, source: Source, *, user_id: str | None = None) -> PortCounts:
        """Load an export file (a path or an open file) into this memory, as `user_id`
        (default: the user it was exported as), embedding it with this memory's
        embedder. Idempotent: what is here already is left as it is.
        ExportFormatError for a file of another format or version, or a bad line."""
        return import_user(self.store, self.embedder, source, user_id)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
