"""Checking the agent's operations before anything touches the store.

The agent refers to memories by short ids ("m3" for a stored memory, "n2" for one
added earlier in this same session); this module resolves them, folds repeated
edits of one memory into a single write, and turns what must not be written into
`none` operations that carry the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deltamem.manager.atomise import drop_quotes, split_facts
from deltamem.rules import DEFAULT, RuleSettings
from deltamem.text import normalise
from deltamem.types import MAX_MEMORY_CHARS, MemoryItem, MemoryType, Operation


@dataclass
class PendingWrite:
    op: str  # "add" | "update"
    content: str
    memory_type: MemoryType | None
    memory_id: str | None = None  # update target
    base: MemoryItem | None = None  # the stored memory an update changes
    chunk: int = 0


@dataclass
class Workspace:
    """What the agent has been shown during one session, and what it has decided."""

    shown: dict[str, MemoryItem] = field(default_factory=dict)  # short id -> stored memory
    short_of: dict[str, str] = field(default_factory=dict)  # memory id -> short id
    pending: list[PendingWrite] = field(default_factory=list)
    noops: list[Operation] = field(default_factory=list)

    def show(self, mem: MemoryItem) -> str:
        if mem.id not in self.short_of:
            short = f"m{len(self.shown) + 1}"
            self.shown[short] = mem
            self.short_of[mem.id] = short
        return self.short_of[mem.id]

    def pending_adds(self) -> list[tuple[str, PendingWrite]]:
        adds = [p for p in self.pending if p.op == "add"]
        return [(f"n{i + 1}", p) for i, p in enumerate(adds)]

    def _live_forms(self) -> dict[str, str | None]:
        """normal form -> memory id (None for pending adds) of everything known now."""
        forms: dict[str, str | None] = {}
        for mem in self.shown.values():
            forms[normalise(mem.content)] = mem.id
        for p in self.pending:
            forms[normalise(p.content)] = p.memory_id
        return forms


def clean(content: Any) -> str:
    return " ".join(str(content or "").split())


def apply_ops(
    ws: Workspace, raw_ops: list[dict[str, Any]], chunk: int = 0, rules: RuleSettings = DEFAULT
) -> None:
    """Validate the agent's raw operations for one chunk into the workspace."""
    pending_by_short = dict(ws.pending_adds())
    for raw in raw_ops:
        if not isinstance(raw, dict):  # servers without schema-constrained decoding
            continue
        op = raw.get("op")
        short = str(raw.get("id") or "").strip()
        mtype = raw.get("type") if raw.get("type") in ("persona", "event", "relationship") else None
        content = clean(raw.get("content"))

        if op == "none":
            mem = ws.shown.get(short)
            if mem is not None:
                ws.noops.append(Operation(op="none", memory_id=mem.id, content=mem.content))
            continue
        if op not in ("add", "update"):
            continue
        if not content:
            ws.noops.append(Operation(op="none", note=f"{op} with empty content refused"))
            continue
        if len(content) > MAX_MEMORY_CHARS:
            ws.noops.append(
                Operation(
                    op="none",
                    content=content[:200],
                    note=f"{op} refused: {len(content)} characters (limit {MAX_MEMORY_CHARS})",
                )
            )
            continue
        same = normalise(content)
        if op == "update" and short in pending_by_short:
            # an edit of a memory this session already added: fold it into that add
            pending_by_short[short].content = content
            pending_by_short[short].memory_type = mtype or pending_by_short[short].memory_type
            continue
        if op == "update" and short in ws.shown:
            target = ws.shown[short]
            if same == normalise(target.content):
                ws.noops.append(
                    Operation(
                        op="none",
                        memory_id=target.id,
                        content=target.content,
                        note="update repeats the memory",
                    )
                )
                continue
            earlier = next((p for p in ws.pending if p.memory_id == target.id), None)
            if earlier is not None:
                earlier.content, earlier.memory_type = content, mtype or earlier.memory_type
            else:
                ws.pending.append(PendingWrite("update", content, mtype, target.id, target, chunk))
            continue
        note = None
        if op == "update":
            # the id was never shown: never touch an unseen memory, keep the fact as new
            note = f"update of unknown id {short!r} kept as add"
            ws.noops.append(Operation(op="none", content=content, note=note))
        facts, quotes = split_facts(content), list[str]()
        if rules.on("QUOTED_FIRST_PERSON"):
            facts, quotes = drop_quotes(facts)
        for quote in quotes:
            ws.noops.append(
                Operation(
                    op="none",
                    content=quote,
                    note="first-person sentence (the user quoted, not a fact) dropped",
                    rule="QUOTED_FIRST_PERSON",
                )
            )
        for fact in facts:
            _add(ws, fact, mtype, chunk)
        pending_by_short = dict(ws.pending_adds())


def _add(ws: Workspace, content: str, mtype: MemoryType | None, chunk: int) -> None:
    forms = ws._live_forms()
    same = normalise(content)
    if same in forms:
        ws.noops.append(
            Operation(
                op="none",
                memory_id=forms[same],
                content=content,
                note="add restates a known memory",
                rule="RESTATES_KNOWN",
            )
        )
        return
    ws.pending.append(PendingWrite("add", content, mtype, None, None, chunk))
