"""`pipeline`: the multi-agent write path of Mem0, rebuilt on deltamem's ports
(SPEC §2), so that it runs side by side with deltamem on the same LLM, embedder
and store.

Per session: one extraction call turns the dialogue into a list of facts
(schema-constrained); then, for each fact in order, one hybrid search of the
user's memories and one decision call that picks ADD / UPDATE / DELETE / NONE
with the id of the memory it acts on. Decisions of a session are collected in a
workspace (a later fact of the same session can update or delete what an
earlier one added) and written through the store in one transaction; deletions
follow it. Sessions are logged first, like deltamem's, so `get_session_memories`
reads the store's history and a re-added session is answered from the log.

Sessions longer than the model's context are read in chunks (one extraction
call each); a short session costs 1 + (number of facts) calls and as many search
queries as facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from string import Template
from typing import Any

import numpy as np

from deltamem.bench.systems.base import REPORTED_KEYS, MemorySystem, Retrieved
from deltamem.embed import Embedder
from deltamem.llm.base import LLM, LLMError
from deltamem.manager.render import chunk_turns, render_turns
from deltamem.memory import Memory, SessionFailed
from deltamem.store.base import PlannedWrite
from deltamem.text import keywords
from deltamem.timeparse import human_date
from deltamem.types import MAX_MEMORY_CHARS, MemoryItem, Operation, SessionRecord

PROMPTS = Path(__file__).parent / "prompts"
OPERATIONS = ("ADD", "UPDATE", "DELETE", "NONE")
MAX_FACTS = 40  # per extraction call

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_FACTS}},
    "required": ["facts"],
}
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"enum": list(OPERATIONS)},
        "id": {"type": "string"},
        "memory": {"type": "string"},
    },
    "required": ["operation", "id", "memory"],
}


def _template(name: str) -> Template:
    return Template((PROMPTS / name).read_text(encoding="utf-8"))


@dataclass
class _Pending:
    """An add decided in this session (None once a later fact deleted it)."""

    content: str


@dataclass
class _Workspace:
    adds: list[_Pending | None] = field(default_factory=list)
    updates: dict[str, str] = field(default_factory=dict)  # stored memory id -> new content
    deletes: list[str] = field(default_factory=list)
    noops: list[Operation] = field(default_factory=list)
    decisions: dict[str, int] = field(default_factory=dict)  # operation -> count


@dataclass
class _Candidate:
    short: str
    memory: MemoryItem | None  # None: an add pending in this session
    pending: int | None
    content: str


@dataclass
class PipelineConfig:
    search_k: int = 5  # memories shown to each decision call
    pending_k: int = 3  # adds of this session shown with them, by similarity
    pending_min_similarity: float = 0.5
    assistant_words: int = 40  # assistant turns shortened as for deltamem's manager
    chunk_tokens: int = 4000
    extract_tokens: int = 1200
    decide_tokens: int = 300


class PipelineSystem(MemorySystem):
    name = "pipeline"

    def __init__(
        self,
        llm: LLM,
        embedder: Embedder,
        path: str | Path,
        config: PipelineConfig | None = None,
    ) -> None:
        super().__init__(llm)
        self.model = llm
        self.embedder = embedder
        self.config = config or PipelineConfig()
        self.memory = Memory(path, llm=llm, embedder=embedder, log_calls=False)
        self.store = self.memory.store
        self._extract_system = _template("pipeline_extract_system.txt").substitute().strip()
        self._extract_user = _template("pipeline_extract_user.txt")
        self._decide_system = _template("pipeline_decide_system.txt").substitute().strip()
        self._decide_user = _template("pipeline_decide_user.txt")
        self.decisions: dict[str, int] = {op: 0 for op in OPERATIONS}  # over the run

    # --- MemorySystem ------------------------------------------------------------
    def _reset(self, user: str) -> None:
        self.memory.reset(user)

    def _add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> dict[str, float]:
        record = self.memory.log_session(
            messages, user_id=user, session_id=session_id, timestamp=timestamp
        )
        session_tokens = sum(
            self.model.count_tokens(f"{m.role}: {m.content}") for m in record.messages
        )
        if record.status == "applied":  # replayed from the log: nothing spent
            nothing: dict[str, float] = {k: 0 for k in REPORTED_KEYS}
            return nothing | {"session_tokens": session_tokens}
        before = self.model.usage.snapshot()
        try:
            facts = self.extract(record)
        except LLMError as exc:
            self.store.mark_failed(user, record.session_id, None, str(exc))
            raise SessionFailed(f"session {record.session_id!r}: {exc}") from exc
        ws = _Workspace()
        for fact in facts:
            self._one_fact(record, fact, ws)
        ops = self._write(record, ws)
        used = self.model.usage.since(before)
        for op, n in ws.decisions.items():
            self.decisions[op] = self.decisions.get(op, 0) + n
        return {
            "session_tokens": session_tokens,
            "llm_calls": used.calls,
            "prompt_tokens": used.prompt_tokens,
            "cached_tokens": used.cached_tokens,
            "completion_tokens": used.completion_tokens,
            "llm_seconds": used.seconds,
            "search_queries": len(facts),
            "memories_stored": sum(o.op in ("add", "update") for o in ops),
        }

    def _session_memories(self, user: str, session_id: str) -> list[str]:
        return [m.content for m in self.memory.session_memories(session_id, user)]

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        return [
            Retrieved(
                text=h.memory.content,
                timestamp=h.memory.timestamp,
                session_id=h.memory.session_id,
                turns=list(h.memory.turns),
                score=h.score,
            )
            for h in self.memory.search(query, user_id=user, limit=k)
        ]

    def close(self) -> None:
        self.memory.close()

    # --- step 1: extraction ----------------------------------------------------------
    def _chunk_budget(self) -> int:
        fixed = self.model.count_tokens(self._extract_system) + 100
        room = self.model.context_window - fixed - self.config.extract_tokens
        return max(256, min(self.config.chunk_tokens, room))

    def extract(self, record: SessionRecord) -> list[str]:
        """Facts of the session, in order, without exact repeats (one call per chunk)."""
        if not any(m.role == "user" for m in record.messages):
            return []  # nothing the user said: nothing to remember
        turns = render_turns(
            record.messages, self.model.count_tokens, assistant_words=self.config.assistant_words
        )
        facts: list[str] = []
        for chunk in chunk_turns(turns, self._chunk_budget()):
            reply = self.model.complete_json(
                [
                    {"role": "system", "content": self._extract_system},
                    {
                        "role": "user",
                        "content": self._extract_user.substitute(
                            session_date=human_date(record.timestamp),
                            conversation="\n".join(t.line for t in chunk),
                        ),
                    },
                ],
                FACTS_SCHEMA,
                purpose="pipeline:extract",
                max_tokens=self.config.extract_tokens,
            )
            raw = reply.get("facts")
            for f in raw if isinstance(raw, list) else []:
                text = " ".join(str(f).split())
                if text and text.lower() not in {x.lower() for x in facts}:
                    facts.append(text[:MAX_MEMORY_CHARS])
        return facts

    # --- step 2: search + decision per fact ------------------------------------------
    def candidates(self, record: SessionRecord, fact: str, ws: _Workspace) -> list[_Candidate]:
        """Stored memories a hybrid search finds for the fact (as this session has left
        them so far), then the closest adds pending in this session."""
        c = self.config
        out: list[_Candidate] = []
        for hit in self.memory.search(fact, user_id=record.user_id, limit=c.search_k):
            mid = hit.memory.id
            if mid in ws.deletes:
                continue
            content = ws.updates.get(mid, hit.memory.content)
            out.append(_Candidate(str(len(out) + 1), hit.memory, None, content))
        live = [(i, p) for i, p in enumerate(ws.adds) if p is not None]
        if live and c.pending_k > 0:
            vecs = self.embedder.embed([fact] + [p.content for _, p in live])
            sims = vecs[1:] @ vecs[0]
            for j in np.argsort(-sims, kind="stable")[: c.pending_k]:
                if sims[j] >= c.pending_min_similarity:
                    i, p = live[int(j)]
                    out.append(_Candidate(str(len(out) + 1), None, i, p.content))
        return out

    def _one_fact(self, record: SessionRecord, fact: str, ws: _Workspace) -> None:
        cands = self.candidates(record, fact, ws)
        lines = [
            f"{cd.short} | "
            f"{cd.memory.timestamp.strftime('%Y-%m-%d') if cd.memory else 'this session'} | "
            f"{cd.content}"
            for cd in cands
        ]
        try:
            reply = self.model.complete_json(
                [
                    {"role": "system", "content": self._decide_system},
                    {
                        "role": "user",
                        "content": self._decide_user.substitute(
                            session_date=human_date(record.timestamp),
                            memories="\n".join(lines) if lines else "(none)",
                            fact=fact,
                        ),
                    },
                ],
                DECISION_SCHEMA,
                purpose="pipeline:decide",
                max_tokens=self.config.decide_tokens,
            )
        except LLMError as exc:  # one failed decision loses one fact, not the session
            ws.noops.append(Operation(op="none", content=fact, note=f"decision failed: {exc}"))
            return
        self.decide(ws, fact, reply, cands)

    @staticmethod
    def decide(ws: _Workspace, fact: str, reply: dict[str, Any], cands: list[_Candidate]) -> None:
        """Apply one decision to the session's workspace."""
        op = str(reply.get("operation", "NONE")).strip().upper()
        op = op if op in OPERATIONS else "NONE"
        ws.decisions[op] = ws.decisions.get(op, 0) + 1
        content = " ".join(str(reply.get("memory") or "").split())[:MAX_MEMORY_CHARS]
        target = next((c for c in cands if c.short == str(reply.get("id", "")).strip()), None)
        if op in ("UPDATE", "DELETE") and target is None:
            if op == "DELETE":
                ws.noops.append(Operation(op="none", content=fact, note="delete of unknown id"))
                return
            op = "ADD"  # an update aimed at no shown memory keeps the fact as new
        if op == "ADD":
            ws.adds.append(_Pending(content or fact))
        elif op == "UPDATE":
            assert target is not None
            new = content or fact
            if target.memory is not None:
                ws.updates[target.memory.id] = new
            elif target.pending is not None:
                ws.adds[target.pending] = _Pending(new)
        elif op == "DELETE":
            assert target is not None
            if target.memory is not None:
                ws.updates.pop(target.memory.id, None)
                ws.deletes.append(target.memory.id)
            elif target.pending is not None:
                ws.adds[target.pending] = None
        else:
            mid = target.memory.id if target is not None and target.memory else None
            ws.noops.append(Operation(op="none", memory_id=mid, content=fact))

    # --- step 3: write -----------------------------------------------------------------
    def _write(self, record: SessionRecord, ws: _Workspace) -> list[Operation]:
        planned: list[tuple[str, str | None, str]] = [
            ("add", None, p.content) for p in ws.adds if p is not None
        ]
        planned += [("update", mid, text) for mid, text in ws.updates.items()]
        writes: list[PlannedWrite] = []
        if planned:
            vecs = self.embedder.embed([text for _, _, text in planned])
            user_idx = [i for i, m in enumerate(record.messages) if m.role == "user"]
            turn_vecs = self.embedder.embed([record.messages[i].content for i in user_idx])
            for (op, mid, text), vec in zip(planned, vecs, strict=True):
                sims = turn_vecs @ vec
                writes.append(
                    PlannedWrite(
                        op=op,
                        content=text,
                        embedding=vec,
                        memory_id=mid,
                        keywords=keywords(text),
                        turns=[user_idx[int(np.argmax(sims))]],
                    )
                )
        ops = self.store.apply_session(record, writes, ws.noops)
        for mid in ws.deletes:
            if self.store.delete(mid, actor="pipeline"):
                ops.append(Operation(op="delete", memory_id=mid))
        return ops
