"""`DeltamemStore`: LangGraph's long-term memory store (`BaseStore`) on deltamem.

LangGraph keeps long-term memory in a store passed to ``compile(store=...)`` (or to
an agent), with namespaces such as ``("memories", user_id)``. Here the namespace
``(*prefix, user_id)`` is that user's deltamem memory:

* ``put(ns, key, {"content": text})`` writes the text as a fact of the user, at
  once and with no LLM call (the caller has decided what to remember), logged as a
  session of its own (``langgraph-put-…``) for provenance; a put on the same key
  updates that fact (its history keeps each version), ``delete`` removes it.
* ``get(ns, key)`` reads it back; the keys of search results work too (a fact the
  manager wrote from a conversation has its memory id as key, a conversation
  excerpt its episode id).
* ``search(ns, query=...)`` is deltamem's fused search over facts and excerpts of
  earlier conversations; without a query, the user's facts, newest first.

An item's value is ``{"content": text, "kind": "fact" | "episode", "timestamp":
event time (ISO 8601)}``, plus ``"speaker"`` for an episode; ``filter`` matches it
(``{"kind": "fact"}``). A put takes a value with its text under ``"content"`` or as
its one string field (LangGraph's examples' ``{"data": ...}``; it reads back under
``"content"``); ``"kind"`` and ``"timestamp"`` are ignored, so a value read back can
be put again.

Every operation names one user: a search over ``("memories",)`` (all users) is
refused, and a key of another user's memory reads as absent. Namespaces outside
``(*prefix, user_id)`` go to `fallback` (e.g. an `InMemoryStore`) when one is given,
and are refused otherwise. LangGraph forbids ``.`` in namespace labels, so a user
id with a dot cannot be a namespace. Facts put here are not in any conversation, so
`Memory.replay` (which rebuilds memory from conversations) does not bring them back.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from deltamem.episodes import is_episode_id
from deltamem.integrations.langgraph.common import MemoryLike, both
from deltamem.provenance import check_content
from deltamem.retrieval.hybrid import Tiers
from deltamem.store.base import PlannedWrite
from deltamem.types import Episode, MemoryItem, SearchHit

FACT_PREFIX = "lg-"
READ_ONLY_FIELDS = ("kind", "timestamp", "speaker")


def fact_id(user_id: str, agent_id: str | None, key: str) -> str:
    """The memory id of a key's fact: a digest of the scope and key (ids are global),
    then the key itself, so that a search result gives the key back."""
    digest = hashlib.sha256("\x1f".join([user_id, agent_id or "", key]).encode()).hexdigest()
    mid = f"{FACT_PREFIX}{digest[:24]}-{quote(key, safe='')}"
    # ids are URL path segments in the REST API (at most 256 characters)
    return mid if len(mid) <= 256 else f"{FACT_PREFIX}{digest[:32]}"


def key_of(memory_id: str) -> str:
    """The key a memory is found under: the key of a put, else the memory's id."""
    if memory_id.startswith(FACT_PREFIX) and len(memory_id) > len(FACT_PREFIX) + 25:
        return unquote(memory_id[len(FACT_PREFIX) + 25 :])
    return memory_id


def value_text(value: Mapping[str, Any]) -> str:
    """The text a put stores: ``value["content"]``, or the value's one string field."""
    fields = {k: v for k, v in value.items() if k not in READ_ONLY_FIELDS}
    text = fields.pop("content", None)
    if text is None and len(fields) == 1:
        text = next(iter(fields.values()))
        fields = {}
    if not isinstance(text, str) or fields:
        raise ValueError(
            "DeltamemStore stores text: put a value like {'content': 'Martin lives in Oslo.'} "
            f"(got the fields {sorted(value)})"
        )
    return check_content(text)  # what a memory's text may be (length, characters)


def _fact_value(m: MemoryItem) -> dict[str, Any]:
    return {"content": m.content, "kind": "fact", "timestamp": m.timestamp.isoformat()}


def _episode_value(e: Episode) -> dict[str, Any]:
    return {
        "content": e.content,
        "kind": "episode",
        "timestamp": e.timestamp.isoformat(),
        "speaker": e.speaker,
    }


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: equality, or ``{"$eq" | "$ne" | "$gt" | ...: x}``."""
    for field, want in (flt or {}).items():
        have = value.get(field)
        if isinstance(want, Mapping) and any(str(k).startswith("$") for k in want):
            for op, x in want.items():
                ok = {
                    "$eq": lambda a, b: a == b,
                    "$ne": lambda a, b: a != b,
                    "$gt": lambda a, b: a is not None and a > b,
                    "$gte": lambda a, b: a is not None and a >= b,
                    "$lt": lambda a, b: a is not None and a < b,
                    "$lte": lambda a, b: a is not None and a <= b,
                }.get(op)
                if ok is None:
                    raise ValueError(f"unsupported filter operator {op!r}")
                if not ok(have, x):
                    return False
        elif have != want:
            return False
    return True


def _condition_holds(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


class DeltamemStore(BaseStore):
    """A LangGraph `BaseStore` whose namespaces ``(*prefix, user_id)`` are deltamem
    users' memories (see the module's docstring)."""

    def __init__(
        self,
        memory: MemoryLike,
        *,
        prefix: tuple[str, ...] = ("memories",),
        agent_id: str | None = None,
        fallback: BaseStore | None = None,
    ) -> None:
        self.memory, self.amemory = both(memory)
        self.prefix = tuple(prefix)
        self.agent_id = agent_id
        self.fallback = fallback

    # --- namespaces -------------------------------------------------------------------
    def user_of(self, namespace: tuple[str, ...]) -> str | None:
        """The user a namespace is the memory of, or None if it is not one of ours."""
        n = len(self.prefix)
        if len(namespace) == n + 1 and tuple(namespace[:n]) == self.prefix:
            return namespace[n]
        return None

    def _ours(self, op: Op) -> bool:
        if isinstance(op, ListNamespacesOp):
            return False  # both stores answer it
        namespace = op.namespace_prefix if isinstance(op, SearchOp) else op.namespace
        if self.user_of(namespace) is not None:
            return True
        ours = (*self.prefix, "<user_id>")
        if isinstance(op, SearchOp) and self.prefix[: len(namespace)] == tuple(namespace):
            raise InvalidNamespaceError(
                f"a search names one user: {ours} (deltamem never searches across users); "
                f"got {namespace}"
            )
        if self.fallback is None:
            raise InvalidNamespaceError(
                f"DeltamemStore holds the namespaces {ours}; got {namespace} "
                "(pass fallback=... to keep other namespaces in another store)"
            )
        return False

    # --- BaseStore --------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        others = [i for i, op in enumerate(ops) if not self._ours(op)]
        if others and self.fallback is not None:
            for i, res in zip(others, self.fallback.batch([ops[i] for i in others]), strict=True):
                results[i] = res
        for i, op in enumerate(ops):
            results[i] = self._run(op, results[i])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        others = [i for i, op in enumerate(ops) if not self._ours(op)]
        if others and self.fallback is not None:
            done = await self.fallback.abatch([ops[i] for i in others])
            for i, res in zip(others, done, strict=True):
                results[i] = res
        # deltamem's calls block (embedder, database): off the event loop, in order
        for i, op in enumerate(ops):
            results[i] = await asyncio.to_thread(self._run, op, results[i])
        return results

    def _run(self, op: Op, fallback_result: Result) -> Result:
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op, fallback_result)
        namespace = op.namespace_prefix if isinstance(op, SearchOp) else op.namespace
        user = self.user_of(namespace)
        if user is None:
            return fallback_result
        if isinstance(op, GetOp):
            return self._get(namespace, user, op.key)
        if isinstance(op, SearchOp):
            return self._search(namespace, user, op)
        if isinstance(op, PutOp):
            if op.value is None:
                self._delete(user, op.key)
            else:
                self._put(user, op.key, op.value)
            return None
        raise ValueError(f"unknown store operation {type(op).__name__}")

    # --- operations -------------------------------------------------------------------
    def _fact(self, user: str, key: str) -> MemoryItem | None:
        """The user's live fact under `key`: a put's key, or a memory id."""
        for mid in (fact_id(user, self.agent_id, key), key):
            m = self.memory.store.get(mid)
            if (
                m is not None
                and m.user_id == user
                and (self.agent_id is None or m.agent_id == self.agent_id)
            ):
                return m
        return None

    def _episode(self, user: str, key: str) -> Episode | None:
        if not is_episode_id(key):
            return None
        found = self.memory.store.get_episodes([key])
        if not found or found[0].user_id != user:
            return None
        if self.agent_id is not None and found[0].agent_id != self.agent_id:
            return None
        return found[0]

    def _get(self, namespace: tuple[str, ...], user: str, key: str) -> Item | None:
        m = self._fact(user, key)
        if m is not None:
            return Item(
                value=_fact_value(m),
                key=key,
                namespace=namespace,
                created_at=m.created_at,
                updated_at=m.updated_at,
            )
        e = self._episode(user, key)
        if e is not None:
            return Item(
                value=_episode_value(e),
                key=key,
                namespace=namespace,
                created_at=e.timestamp,
                updated_at=e.timestamp,
            )
        return None

    def _put(self, user: str, key: str, value: Mapping[str, Any]) -> None:
        if is_episode_id(key):
            raise ValueError(f"{key!r} is an excerpt of a conversation, which cannot be changed")
        text = value_text(value)
        current = self._fact(user, key)
        if current is not None and current.content == text:
            return
        record = self.memory.log_session(
            [{"role": "system", "content": text}],
            user_id=user,
            session_id=f"langgraph-put-{uuid.uuid4().hex[:20]}",
            agent_id=self.agent_id,
            infer=False,
        )
        vector = self.memory.embedder.embed([text])[0]
        write = (
            PlannedWrite("update", text, vector, memory_id=current.id)
            if current is not None
            else PlannedWrite("add", text, vector, memory_id=fact_id(user, self.agent_id, key))
        )
        self.memory.store.apply_session(record, [write], [])

    def _delete(self, user: str, key: str) -> None:
        if is_episode_id(key):
            raise ValueError(
                f"{key!r} is an excerpt of a conversation: conversations are forgotten "
                "with the user (Memory.reset), not one turn at a time"
            )
        m = self._fact(user, key)
        if m is not None:
            self.memory.store.delete(m.id, actor="api")

    def _search(self, namespace: tuple[str, ...], user: str, op: SearchOp) -> list[SearchItem]:
        kind = (op.filter or {}).get("kind")
        tiers: Tiers = "facts" if kind == "fact" else "episodes" if kind == "episode" else "all"
        want = max(op.offset, 0) + max(op.limit, 0)
        if op.query:
            # a filter is applied to the ranked hits: look further than the page
            depth = want if not op.filter else max(want * 3, want + 50)
            hits = self.memory.search(
                op.query, user_id=user, limit=depth, agent_id=self.agent_id, tiers=tiers
            )
            items = [self._hit_item(namespace, h) for h in hits]
        elif tiers == "episodes":
            items = []  # episodes are found by what they say, not listed
        else:
            facts = self.memory.get_all(user_id=user, agent_id=self.agent_id)
            facts.sort(key=lambda m: m.updated_at, reverse=True)
            items = [
                SearchItem(
                    namespace, key_of(m.id), _fact_value(m), m.created_at, m.updated_at, None
                )
                for m in facts
            ]
        kept = [it for it in items if _matches(it.value, op.filter)]
        return kept[op.offset : op.offset + op.limit]

    @staticmethod
    def _hit_item(namespace: tuple[str, ...], h: SearchHit) -> SearchItem:
        m = h.memory
        if h.kind == "episode":
            value = {
                "content": m.content,
                "kind": "episode",
                "timestamp": m.timestamp.isoformat(),
                "speaker": h.speaker,
            }
            return SearchItem(namespace, m.id, value, m.created_at, m.updated_at, h.score)
        return SearchItem(
            namespace, key_of(m.id), _fact_value(m), m.created_at, m.updated_at, h.score
        )

    def _list_namespaces(self, op: ListNamespacesOp, fallback_result: Result) -> Result:
        """Our users' namespaces and the fallback's, filtered, cut to `max_depth`,
        sorted, paged."""
        found = {(*self.prefix, u) for u in self.memory.users() if "." not in u}
        if isinstance(fallback_result, list):
            found |= {tuple(ns) for ns in fallback_result if isinstance(ns, tuple)}
        conds = op.match_conditions or ()
        kept = [ns for ns in found if all(_condition_holds(c, ns) for c in conds)]
        if op.max_depth is not None:
            kept = [ns[: op.max_depth] for ns in kept]
        return sorted(set(kept))[op.offset : op.offset + op.limit]
