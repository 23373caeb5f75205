"""Where a memory came from: its history joined to the sessions and turns behind each
version, and hand edits checked before they reach the store. `Memory.timeline` and
`Memory.edit` are the front door; the inspector reads these."""

from __future__ import annotations

from deltamem.store.base import Store
from deltamem.types import MAX_MEMORY_CHARS, HistoryEntry, Operation, Version

PERSON = "person"  # the history actor of an edit or delete made by hand (the inspector)


class InvalidEdit(ValueError):
    """A hand edit that cannot be stored; nothing was changed."""


def check_content(content: str) -> str:
    """The text of an edited memory, stripped, or InvalidEdit naming the fault."""
    if not isinstance(content, str):
        raise InvalidEdit("the memory's text must be a string")
    text = content.strip()
    if not text:
        raise InvalidEdit("the memory's text is empty")
    if len(text) > MAX_MEMORY_CHARS:
        raise InvalidEdit(f"the memory's text is {len(text)} characters (limit {MAX_MEMORY_CHARS})")
    if any(ord(c) < 32 and c not in "\t\n" for c in text):
        raise InvalidEdit("the memory's text contains a control character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEdit("the memory's text is not valid Unicode (lone surrogate)") from exc
    return text


def _turns_of(entry: HistoryEntry, ops: list[Operation]) -> list[int]:
    """The turns of the operation of a session that wrote this history entry."""
    same = [op for op in ops if op.memory_id == entry.memory_id and op.op == entry.op]
    exact = [op for op in same if op.content == entry.new_content]
    return list((exact or same)[-1].turns) if same else []


def timeline(store: Store, memory_id: str) -> list[Version]:
    """Every version of a memory, oldest first (add, updates, delete), each with the
    session (and agent) it came from and the turns of that session behind it."""
    entries = store.history(memory_id)
    if not entries:
        return []
    live = store.get(memory_id)
    owner = next((e.user_id for e in entries if e.user_id), live.user_id if live else None)
    agents: dict[str, str | None] = {}  # session id -> its agent
    if live is not None and live.session_id is not None:
        agents[live.session_id] = live.agent_id
    out: list[Version] = []
    for e in entries:
        agent: str | None = None
        turns: list[int] = []
        if e.session_id is not None and owner is not None and e.op in ("add", "update"):
            if e.session_id not in agents:
                found = [s for s in store.list_sessions(owner) if s.session_id == e.session_id]
                agents[e.session_id] = found[0].agent_id if found else None
            agent = agents[e.session_id]
            ops = store.session_operations(owner, e.session_id, agent)
            turns = _turns_of(e, ops)
        out.append(Version(**e.model_dump(), agent_id=agent, turns=turns))
    return out
