"""What the nodes, tools and store share.

* Whose memory a run may touch: the user in the graph's config
  (``config["configurable"]["user_id"]``, as LangGraph's docs key long-term memory),
  never an argument the model writes, so a model cannot read or write another
  user's memory by naming them.
* LangChain messages as deltamem sessions: a conversation's finished turns (the
  human messages and the assistant's text replies; tool traffic and system prompts
  are left out), each turn one session with a stable id, so saving it again is a
  no-op.
* Recalled memories as text: labelled facts and dated excerpts.
* `Writer`: hands a session to memory now (``infer=True``), verbatim
  (``infer=False``: searchable at once, no LLM call), or verbatim now and turned
  into facts by a background thread (``background=True``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from deltamem.aio import AsyncMemory
from deltamem.answer import EXCERPT_CHARS, memory_lines
from deltamem.ids import MAX_USER_ID_CHARS, check_id, id_fault
from deltamem.memory import Memory, SessionFailed
from deltamem.text import clip
from deltamem.types import MAX_MESSAGE_CHARS, AddResult, SearchHit

log = logging.getLogger("deltamem.integrations.langgraph")

USER_KEY = "user_id"
MemoryLike = Memory | AsyncMemory

MEMORY_HEADER = (
    "What you remember about the user from earlier conversations. Use it when it "
    "helps; where two memories disagree, the newer one is right."
)


class MissingUser(ValueError):
    """The graph was run without a user in its config."""


def user_of(config: Mapping[str, Any] | None, key: str = USER_KEY) -> str:
    """The user whose memory this run may touch: ``config["configurable"][key]``."""
    configurable = (config or {}).get("configurable") or {}
    user = configurable.get(key)
    if user is None or user == "":
        raise MissingUser(
            f"no user in the graph's config: run it with "
            f"config={{'configurable': {{'{key}': ...}}}} (deltamem keeps one memory per user)"
        )
    if not isinstance(user, str):
        raise MissingUser(f"config['configurable'][{key!r}] must be a string, not {type(user)}")
    return check_id(user, key, MAX_USER_ID_CHARS)


def thread_of(config: Mapping[str, Any] | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or "langgraph")


def both(memory: MemoryLike) -> tuple[Memory, AsyncMemory]:
    """The same memory for sync and async code (AsyncMemory writes one user at a time)."""
    if isinstance(memory, AsyncMemory):
        return memory.memory, memory
    if isinstance(memory, Memory):
        return memory, AsyncMemory(memory=memory)
    raise TypeError(f"expected a deltamem Memory or AsyncMemory, not {type(memory).__name__}")


# --- messages ---------------------------------------------------------------------------
def text_of(message: BaseMessage) -> str:
    """The text of a message (the text blocks of a multi-part content)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(p for p in parts if p)


def messages_of(state: Any, key: str = "messages") -> list[BaseMessage]:
    """The messages of a graph state (a dict, or an object with the attribute)."""
    value = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    return list(value or [])


def last_human_text(messages: Sequence[BaseMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            text = text_of(m).strip()
            if text:
                return text
    return ""


@dataclass
class Turn:
    """A human message (or several in a row) and what followed it up to the next."""

    anchor: str  # the id of its first human message (its position when it has none)
    messages: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False  # ends with a reply of the assistant that calls no tool
    replied: bool = False


def turns_of(messages: Sequence[BaseMessage]) -> list[Turn]:
    """The conversation cut into turns, oldest first; messages before the first human
    one (a greeting) and system prompts belong to none."""
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        if isinstance(m, HumanMessage):
            if not turns or turns[-1].replied:
                turns.append(Turn(anchor=m.id or f"#{i}"))
            entry = {"role": "user", "content": text_of(m)}
            if m.name:
                entry["name"] = m.name
            turns[-1].messages.append(entry)
            turns[-1].finished = False
        elif turns and isinstance(m, AIMessage):
            turns[-1].messages.append({"role": "assistant", "content": text_of(m)})
            turns[-1].replied = True
            turns[-1].finished = not m.tool_calls
        elif turns and isinstance(m, ToolMessage):
            turns[-1].finished = False  # the model has yet to read the tool's answer
    for t in turns:
        t.messages = [
            {**e, "content": e["content"][:MAX_MESSAGE_CHARS]}
            for e in t.messages
            if e["content"].strip()
        ]
    return turns


def session_id_for(thread: str, anchor: str) -> str:
    """A turn's session id: readable where the ids allow it, a digest otherwise."""
    sid = f"{thread}:{anchor}"
    if id_fault(sid) is None:
        return sid
    return "lg-" + hashlib.sha256(f"{thread}\x1f{anchor}".encode()).hexdigest()[:32]


# --- memories as text -----------------------------------------------------------------
def memory_prompt(hits: Sequence[SearchHit], header: str = MEMORY_HEADER) -> str | None:
    """A system prompt of the recalled facts and conversation excerpts, each dated,
    oldest first (so the newest is read last); None when nothing was recalled."""
    if not hits:
        return None
    facts, excerpts = memory_lines(list(hits))
    parts = [header]
    if facts:
        parts += ["", "Facts:", *(f"- {line}" for line in facts)]
    if excerpts:
        parts += ["", "Excerpts of earlier conversations:", *(f"- {line}" for line in excerpts)]
    return "\n".join(parts)


def hit_line(hit: SearchHit) -> str:
    """One search hit, labelled: ``[fact] 2029-02-13 | Martin lives in Oslo.`` or
    ``[episode] 2029-02-13 | user: I moved to Oslo.``"""
    date = f"{hit.memory.timestamp:%Y-%m-%d}"
    if hit.kind == "episode":
        return (
            f"[episode] {date} | {hit.speaker or 'user'}: {clip(hit.memory.content, EXCERPT_CHARS)}"
        )
    return f"[fact] {date} | {hit.memory.content}"


def describe(result: AddResult) -> str:
    """What an add did, in a sentence a model can read."""
    if result.status == "deferred":
        return "Noted: stored verbatim and searchable now; not yet turned into facts."
    if result.status != "applied":
        return f"Not stored as facts yet (session {result.status})."
    changes = [
        f"updated {o.old_content!r} to {o.content!r}"
        if o.op == "update"
        else f"added {o.content!r}"
        for o in result.applied
    ]
    return "Remembered: " + "; ".join(changes) + "." if changes else "Nothing new to remember."


# --- writing ---------------------------------------------------------------------------
class Writer:
    """Hands sessions to memory.

    ``infer=True`` (default): `Memory.add` runs the manager before returning (with the
    embedded model on a small CPU that takes a while). ``infer=False``: the session is
    stored verbatim, its turns searchable at once, no LLM call; `Memory.process_pending`
    turns it into facts later. ``background=True``: verbatim at once, then the manager
    runs in one background thread, sessions in the order they came; `flush()` waits
    for it. A session the manager fails on stays in the log as failed
    (`Memory.retry`)."""

    def __init__(
        self,
        memory: MemoryLike,
        *,
        infer: bool = True,
        background: bool = False,
        agent_id: str | None = None,
    ) -> None:
        self.memory, self.amemory = both(memory)
        self.infer = infer
        self.background = background
        self.agent_id = agent_id
        self._executor: ThreadPoolExecutor | None = None
        self._futures: list[Future[AddResult | None]] = []
        self._lock = threading.Lock()

    def write(
        self, messages: list[dict[str, Any]], *, user_id: str, session_id: str | None
    ) -> AddResult:
        result = self.memory.add(
            messages,
            user_id=user_id,
            session_id=session_id,
            agent_id=self.agent_id,
            infer=self.infer and not self.background,
        )
        return self._after(result, user_id)

    async def awrite(
        self, messages: list[dict[str, Any]], *, user_id: str, session_id: str | None
    ) -> AddResult:
        result = await self.amemory.add(
            messages,
            user_id=user_id,
            session_id=session_id,
            agent_id=self.agent_id,
            infer=self.infer and not self.background,
        )
        return self._after(result, user_id)

    def _after(self, result: AddResult, user_id: str) -> AddResult:
        if self.background and self.infer and result.status == "deferred":
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="deltamem-memory")
                self._futures = [f for f in self._futures if not f.done()]
                self._futures.append(self._executor.submit(self._infer, user_id, result.session_id))
        return result

    def _infer(self, user_id: str, session_id: str) -> AddResult | None:
        try:
            return self.memory.retry(session_id, user_id=user_id, agent_id=self.agent_id)
        except SessionFailed as exc:
            log.warning("deltamem: %s", exc)
        except Exception:  # a background thread has no caller to raise to
            log.exception("deltamem: session %r of %r was not processed", session_id, user_id)
        return None

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the background work queued so far; False if `timeout` ran out."""
        with self._lock:
            pending = list(self._futures)
        _, not_done = wait_futures(pending, timeout=timeout)
        return not not_done

    def close(self) -> None:
        """Finish the background work and stop its thread."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
