"""The memory manager (DeltaMem design): reads a session and plans add / update /
none operations on the bank, which the caller writes in one transaction.

Two strategies (`ManagerConfig.strategy`):

* "turns" (default): facts are extracted one user turn at a time, without the
  known memories (`extract.py`), then each new fact meets its nearest memories in
  a decision step (`resolve.py`), taken in code by default (`decide`). Built for
  small local models, which copy whatever long list they are shown.
* "session": one agent call per chunk of the session, shown the related memories,
  answering with the whole list of operations; stronger models use it well.

"session", per chunk of the session:
  1. pre-retrieve memories related to the user turns (hybrid search);
  2. ask the model for operations, optionally letting it search first
     (bounded rounds, schema-constrained replies);
  3. validate the operations into a workspace shared by the session's chunks.
The result is a plan; the caller writes it in one transaction.

The static instructions are the first message of every call so the llama.cpp KV
cache serves them from the second session on.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.llm.base import LLM
from deltamem.manager import schema
from deltamem.manager.extract import FactExtractor, introduced_name, name_in
from deltamem.manager.outdate import mark_outdated
from deltamem.manager.render import (
    Turn,
    chunk_turns,
    memory_lines,
    render_turns,
    template,
)
from deltamem.manager.resolve import Decide, Resolver
from deltamem.manager.validate import PendingWrite, Workspace, apply_ops
from deltamem.retrieval.hybrid import BESIDE, Beside, HybridSearcher
from deltamem.rules import DEFAULT, RULES, RuleSettings
from deltamem.store.base import PlannedWrite, Store
from deltamem.text import keywords, leading_name
from deltamem.timeparse import human_date
from deltamem.types import MemoryItem, Operation, SessionRecord

# the thresholds of the "session" strategy's rules (deltamem.rules.registry), which
# `ManagerConfig.rules` can move: an add restating a memory (RESTATES_KNOWN), an
# update copying another memory (UPDATE_COPIES_OTHER), a mis-aimed update
# (UPDATE_UNRELATED)
NEAR_DUPLICATE = RULES["RESTATES_KNOWN"].thresholds["cosine"]
COPIED_UPDATE = RULES["UPDATE_COPIES_OTHER"].thresholds["cosine"]
UNRELATED_UPDATE = RULES["UPDATE_UNRELATED"].thresholds["cosine"]


@dataclass
class ManagerConfig:
    # "turns": per-turn extraction, then a narrow decision per fact (small models);
    # "session": one agent call per chunk that sees the related memories
    strategy: Literal["turns", "session"] = "turns"
    # "turns": how a new fact is decided against its nearest memories: "code" (same,
    # richer version, one value swapped; else added beside) or "model" (a narrow call
    # per fact). On the embedded 1.5B model the call's updates were wrong in every
    # sampled case and erased true facts (docs/journal/benchmarks.md); stronger models may
    # do better with "model"
    decide: Decide = "code"
    assistant_words: int = 40  # assistant turns are cut to about this many words
    prefetch: int = 12  # memories pre-retrieved per chunk (a small model copies long lists)
    # Search-tool rounds per chunk. Off by default: with the embedded 1.5B model a
    # search round made it drop every operation (docs/journal/benchmarks.md); pre-retrieval
    # already shows the related memories. Stronger models can use 1-2.
    search_rounds: int = 0
    search_hits: int = 6  # results per search round
    chunk_tokens: int = 4000  # most conversation tokens read in one call
    # A reply past ~15 atomic facts is, with small models, a reply copying the known
    # memories back; the cut keeps its finished operations (llm/jsonrepair.py).
    output_tokens: int = 600
    # which rules run and at what thresholds (deltamem.rules; docs/rules.md)
    rules: RuleSettings = field(default_factory=lambda: DEFAULT)
    # what `answer` reads beside the raw turns a plain search finds (Memory.context):
    # the turns the best facts were written from ("turns"), the facts themselves
    # ("facts"), or both. On LoCoMo the 1.5B answerer judged right more often from the
    # turns: a wrong fact misled it, its turn did not (docs/journal/benchmarks.md)
    beside: Beside = "turns"
    # how many of the best facts lead to what is beside (None: half the turns read)
    beside_facts: int | None = None

    @classmethod
    def from_env(cls) -> ManagerConfig:
        """Defaults, with the strategy from $DELTAMEM_MANAGER ("turns" or "session")
        and the decision step from $DELTAMEM_DECIDE ("code" or "model") when set:
        the service and the CLI take them from there."""
        strategy = os.environ.get("DELTAMEM_MANAGER", "").strip().lower() or "turns"
        if strategy not in ("turns", "session"):
            raise ValueError(
                f"DELTAMEM_MANAGER={strategy!r}: the manager strategy is 'turns' or 'session'"
            )
        decide = os.environ.get("DELTAMEM_DECIDE", "").strip().lower() or "code"
        if decide not in ("code", "model"):
            raise ValueError(f"DELTAMEM_DECIDE={decide!r}: the decision is 'code' or 'model'")
        beside = os.environ.get("DELTAMEM_BESIDE", "").strip().lower() or "turns"
        if beside not in BESIDE:
            raise ValueError(
                f"DELTAMEM_BESIDE={beside!r}: what answers read beside the turns is "
                + ", ".join(repr(b) for b in BESIDE)
            )
        raw = os.environ.get("DELTAMEM_BESIDE_FACTS", "").strip()
        beside_facts = None
        if raw:
            if not raw.isdecimal():
                raise ValueError(
                    f"DELTAMEM_BESIDE_FACTS={raw!r}: how many facts lead to what answers "
                    "read beside the turns is a whole number, 0 or more"
                )
            beside_facts = int(raw)
        return cls(
            strategy=strategy,  # type: ignore[arg-type]
            decide=decide,  # type: ignore[arg-type]
            beside=beside,  # type: ignore[arg-type]
            beside_facts=beside_facts,
        )


@dataclass
class Plan:
    writes: list[PlannedWrite]
    noops: list[Operation]
    stats: dict[str, float] = field(default_factory=dict)


class Manager:
    def __init__(
        self,
        llm: LLM,
        embedder: Embedder,
        store: Store,
        config: ManagerConfig | None = None,
    ) -> None:
        self.llm = llm
        self.embedder = embedder
        self.store = store
        self.searcher = HybridSearcher(store, embedder)
        self.config = config or ManagerConfig.from_env()
        self._system = template("manager_system.txt").substitute()
        # a worked example as a prior exchange: small models follow a shown answer far
        # better than a described one, and being static it stays in the KV cache
        self._example = [
            {"role": "user", "content": template("example_session.txt").substitute()},
            {"role": "assistant", "content": template("example_answer.txt").substitute()},
        ]
        self._session = template("manager_session.txt")
        self._results = template("search_results.txt")
        self._final = template("instruction_final.txt").substitute().strip()
        self._search = template("instruction_search.txt").substitute().strip()

    # --- budget ------------------------------------------------------------------
    def _chunk_budget(self) -> int:
        c = self.config
        fixed = sum(self.llm.count_tokens(m["content"]) for m in self._example)
        fixed += self.llm.count_tokens(self._system) + 200
        memories = c.prefetch * 40 + c.search_rounds * c.search_hits * 40
        room = self.llm.context_window - fixed - memories - c.output_tokens
        return max(256, min(c.chunk_tokens, room))

    # --- the loop ----------------------------------------------------------------
    def plan(self, session: SessionRecord) -> Plan:
        c = self.config
        msgs = session.messages
        user_idx = [i for i, m in enumerate(msgs) if m.role == "user"]
        session_tokens = sum(self.llm.count_tokens(f"{m.role}: {m.content}") for m in msgs)
        stats: dict[str, float] = {
            "session_tokens": session_tokens,
            "chunks": 0,
            "search_queries": 0,
            "llm_calls": 0,
        }
        ws = Workspace()
        if not user_idx:  # nothing the user said: nothing to remember
            return Plan([], [], stats)
        if c.strategy == "turns":
            return self._plan_by_turns(session, stats)
        user_vecs = dict(
            zip(user_idx, self.embedder.embed([msgs[i].content for i in user_idx]), strict=True)
        )
        turns = render_turns(msgs, self.llm.count_tokens, assistant_words=c.assistant_words)
        chunks = chunk_turns(turns, self._chunk_budget())
        for n, chunk in enumerate(chunks):
            idx = sorted({t.index for t in chunk if t.index in user_vecs})
            if not idx:
                continue
            stats["chunks"] += 1
            self._run_chunk(session, chunk, idx, user_vecs, ws, n, stats)
        writes = self._finish(session, ws, user_vecs)
        return Plan(writes, ws.noops, stats)

    def _plan_by_turns(self, session: SessionRecord, stats: dict[str, float]) -> Plan:
        noops: list[Operation] = []
        rules = self.config.rules
        extractor = FactExtractor(
            self.llm, assistant_words=self.config.assistant_words, rules=rules
        )
        name = self._known_name(session)
        candidates = extractor.extract(session, name, noops)
        resolver = Resolver(self.llm, self.embedder, self.store, self.config.decide, rules)
        writes, calls = resolver.resolve(session, candidates, noops, name)
        stats["llm_calls"] += sum(m.role == "user" for m in session.messages) + calls
        stats["chunks"] = 1
        for op in noops:
            if op.rule:
                stats[f"rule.{op.rule}"] = stats.get(f"rule.{op.rule}", 0) + 1
        return Plan(writes, noops, stats)

    def _known_name(self, session: SessionRecord) -> str | None:
        """The user's name, where this session or a memory states it ("... name is
        Sarah Garcia"), else the name most of their facts open with: facts then name
        the person instead of "The user"."""
        own = [m.content for m in session.messages if m.role == "user"]
        said = name_in(own) or introduced_name(own)
        if said:
            return said
        found = self.searcher.rank(["name is"], session.user_id, agent_id=session.agent_id)
        known = [m.content for m in self.store.get_many([mid for mid, _ in found[:10]])]
        early = self.store.list_memories(session.user_id, session.agent_id, limit=50)
        return (
            name_in(known)
            or leading_name([m.content for m in early])
            or self._introduced_before(session)
        )

    def _introduced_before(self, session: SessionRecord, first: int = 3) -> str | None:
        """The name the person gave in one of their first sessions ("Hi, I'm Ola
        Berg"), when no memory names them yet (a bank of one or two facts)."""
        earlier = [
            s
            for s in self.store.list_sessions(session.user_id, limit=first * 3)
            if s.agent_id == session.agent_id and s.session_id != session.session_id
        ][:first]
        for rec in earlier:
            own = [m.content for m in rec.messages if m.role == "user"]
            if said := name_in(own) or introduced_name(own):
                return said
        return None

    def _run_chunk(
        self,
        session: SessionRecord,
        chunk: list[Turn],
        user_turns: list[int],
        user_vecs: dict[int, np.ndarray],
        ws: Workspace,
        n: int,
        stats: dict[str, float],
    ) -> None:
        c = self.config
        queries = [session.messages[i].content for i in user_turns]
        vecs = np.stack([user_vecs[i] for i in user_turns])
        ranked = self.searcher.rank(
            queries, session.user_id, vectors=vecs, agent_id=session.agent_id, depth=8
        )
        related = self.store.get_many([mid for mid, _ in ranked[: c.prefetch]])
        listed: list[tuple[str, MemoryItem | None, str]] = [
            (ws.show(m), m, m.content) for m in related
        ]
        listed += [(short, None, p.content) for short, p in ws.pending_adds()]
        ids = [short for short, _, _ in listed]  # the only ids the reply may name
        prompt = self._session.substitute(
            session_date=human_date(session.timestamp),
            conversation="\n".join(t.line for t in chunk),
            memories=memory_lines(listed),
            instruction=self._search if c.search_rounds > 0 else self._final,
        )
        messages = [
            {"role": "system", "content": self._system},
            *self._example,
            {"role": "user", "content": prompt},
        ]
        searching = c.search_rounds > 0
        reply = self.llm.complete_json(
            messages,
            schema.search_or_operations(ids) if searching else schema.operations(ids),
            purpose="manager",
            max_tokens=c.output_tokens,
            check=schema.check_search_or_operations if searching else schema.check_operations,
        )
        stats["llm_calls"] += 1
        rounds = 0
        # replies are checked: one without "operations" is a search request
        while "operations" not in reply and rounds < c.search_rounds:
            rounds += 1
            asked = [str(q) for q in reply["search"][:3] if str(q).strip()]
            stats["search_queries"] += len(asked)
            found = self.searcher.rank(asked, session.user_id, agent_id=session.agent_id, depth=8)
            fresh = [mid for mid, _ in found if mid not in ws.short_of][: c.search_hits]
            hits = [(ws.show(m), m, m.content) for m in self.store.get_many(fresh)]
            ids += [short for short, _, _ in hits]
            messages = [  # a new list: the messages of earlier calls stay as they were sent
                *messages,
                {"role": "assistant", "content": json.dumps(reply)},
                {"role": "user", "content": self._results.substitute(results=memory_lines(hits))},
            ]
            reply = self.llm.complete_json(
                messages,
                schema.operations(ids),
                purpose="manager",
                max_tokens=c.output_tokens,
                check=schema.check_operations,
            )
            stats["llm_calls"] += 1
        apply_ops(
            ws, reply["operations"], chunk=n, rules=c.rules
        )  # the last call allowed no search

    # --- from decisions to writes -------------------------------------------------
    def _finish(
        self, session: SessionRecord, ws: Workspace, user_vecs: dict[int, np.ndarray]
    ) -> list[PlannedWrite]:
        if not ws.pending:
            return []
        vecs = self.embedder.embed([p.content for p in ws.pending])
        copied = self._copied_updates(ws, vecs)
        self._retarget_unrelated_updates(ws, vecs)
        idx = list(user_vecs)
        turn_matrix = np.stack([user_vecs[i] for i in idx])
        writes: list[PlannedWrite] = []
        kept: list[np.ndarray] = []
        for n, (p, vec) in enumerate(zip(ws.pending, vecs, strict=True)):
            if n in copied or (p.op == "add" and self._restates(session, p, vec, kept, ws)):
                continue
            sims = turn_matrix @ vec
            best = float(sims.max())
            turns = [idx[j] for j in np.argsort(-sims)[:3] if sims[j] >= best - 0.05]
            write = PlannedWrite(
                op=p.op,
                content=p.content,
                embedding=vec,
                memory_id=p.memory_id,
                memory_type=p.memory_type,
                keywords=keywords(p.content),
                turns=sorted(turns),
            )
            writes.append(
                mark_outdated(self.store, write, session, writes, None, self.config.rules)
            )
            if p.op == "add":
                kept.append(vec)
        return writes

    def _cut(self, code: str) -> float:
        """The cosine threshold of a session-strategy rule; switched off, a cut no
        cosine reaches (or, for UPDATE_UNRELATED, none falls under)."""
        rule = RULES[code]
        if not self.config.rules.on(code):
            return -2.0 if code == "UPDATE_UNRELATED" else 2.0
        return self.config.rules.threshold(rule, "cosine")

    def _copied_updates(self, ws: Workspace, vecs: np.ndarray) -> set[int]:
        """Updates whose new sentence restates a different known memory: a small model
        writing the list of known memories back under shifted ids. Applying them would
        overwrite true facts with copies of others, so they are dropped."""
        others = list(ws.shown.values())
        updates = [i for i, p in enumerate(ws.pending) if p.op == "update"]
        if not others or not updates:
            return set()
        known = self.embedder.embed([m.content for m in others])
        dropped: set[int] = set()
        for i in updates:
            sims = known @ vecs[i]
            for j in np.argsort(-sims)[:2]:
                if others[j].id != ws.pending[i].memory_id and sims[j] >= self._cut(
                    "UPDATE_COPIES_OTHER"
                ):
                    ws.noops.append(
                        Operation(
                            op="none",
                            memory_id=ws.pending[i].memory_id,
                            content=ws.pending[i].content,
                            note=f"update copies memory {others[j].id}; dropped",
                            rule="UPDATE_COPIES_OTHER",
                        )
                    )
                    dropped.add(i)
                    break
        return dropped

    def _retarget_unrelated_updates(self, ws: Workspace, vecs: np.ndarray) -> None:
        """An update whose new sentence has nothing to do with the memory it overwrites
        is a mis-aimed id (small models pick ids by position); writing it would erase
        a true fact. Such an update becomes an add and the old memory stays."""
        updates = [(i, p) for i, p in enumerate(ws.pending) if p.op == "update" and p.base]
        if not updates:
            return
        olds = self.embedder.embed([p.base.content for _, p in updates])  # type: ignore[union-attr]
        for (i, p), old in zip(updates, olds, strict=True):
            if float(old @ vecs[i]) < self._cut("UPDATE_UNRELATED"):
                ws.noops.append(
                    Operation(
                        op="none",
                        memory_id=p.memory_id,
                        content=p.content,
                        note="update unrelated to its target; kept as add",
                        rule="UPDATE_UNRELATED",
                    )
                )
                p.op, p.memory_id, p.base = "add", None, None

    def _restates(
        self,
        session: SessionRecord,
        p: PendingWrite,
        vec: np.ndarray,
        kept: list[np.ndarray],
        ws: Workspace,
    ) -> bool:
        """An add nearly identical to a stored memory or to another add of this session."""
        cut = self._cut("RESTATES_KNOWN")
        if any(float(k @ vec) >= cut for k in kept):
            ws.noops.append(
                Operation(op="none", content=p.content, note="duplicate add", rule="RESTATES_KNOWN")
            )
            return True
        top = self.store.dense_search(session.user_id, vec, 1, session.agent_id)
        updated = {q.memory_id for q in ws.pending if q.op == "update"}
        if top and top[0][1] >= cut and top[0][0] not in updated:
            ws.noops.append(
                Operation(
                    op="none",
                    memory_id=top[0][0],
                    content=p.content,
                    note="add restates a known memory",
                    rule="RESTATES_KNOWN",
                )
            )
            return True
        return False
