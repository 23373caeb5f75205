"""Hybrid retrieval: dense (embedding cosine) and sparse (BM25 over FTS) rankings,
fused by reciprocal rank fusion, which needs no score calibration between them.

Two tiers are searched: facts (the memory bank) and episodes (the session log's
raw turns). Each tier's dense and keyword rankings are fused, and each tier keeps
half of the results it can fill, each hit saying its kind: fused as one list, the
facts (which all repeat the person's name, and agree with each other) crowded the
turns out (docs/journal/benchmarks.md, "Search, measured again").

The person's name is left out of keyword queries: the manager writes it into
nearly every fact and the person never says it of themselves, so it matches all
facts and no turn of theirs and tells nothing about which item answers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.store.base import Store, TierRanking
from deltamem.text import leading_name, terms
from deltamem.types import SearchFilters, SearchHit, utcnow

RRF_K = 60
NAME_SAMPLE = 50  # facts read to find the name most of them open with
# seconds a person's name (or that none was found) is trusted before it is read
# again: reading it sorts the user's facts, milliseconds at 10k of them
NAME_TTL = 300.0
NAME_CACHE = 4096  # users whose name is kept
Tiers = Literal["all", "facts", "episodes"]
# what the answerer reads beside the raw turns (`Memory.context`): the best facts, the
# turns they were written from, or both
Beside = Literal["facts", "turns", "both"]
BESIDE: tuple[Beside, ...] = ("facts", "turns", "both")


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = Σ 1 / (k + rank of d in each ranking).
    Equal scores are common (ranks 3 and 5 against 5 and 3); they are ordered by
    the first ranking, then by each next one, so that the order depends on the
    rankings alone, not on ids (a memory's id is random: two runs that write the
    same bank would otherwise rank it differently)."""
    scores: dict[str, float] = {}
    places: dict[str, list[int]] = {}
    for i, ranking in enumerate(rankings):
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
            places.setdefault(doc, [len(r) + 1 for r in rankings])[i] = rank
    return sorted(scores.items(), key=lambda kv: (-kv[1], places[kv[0]], kv[0]))


class HybridSearcher:
    def __init__(self, store: Store, embedder: Embedder, depth: int = 40) -> None:
        self.store = store
        self.embedder = embedder
        self.depth = depth  # how deep each ranking goes before fusion
        self._names: dict[tuple[str, str | None], tuple[float, set[str]]] = {}

    def rank(
        self,
        queries: Sequence[str],
        user_id: str,
        *,
        vectors: np.ndarray | None = None,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        depth: int | None = None,
    ) -> list[tuple[str, float]]:
        """Fused ranking of memory ids for one or several queries."""
        depth = depth or self.depth
        if vectors is None:
            vectors = self.embedder.embed(list(queries))
        rankings: list[list[str]] = []
        for query, vec in zip(queries, vectors, strict=True):
            dense = self.store.dense_search(user_id, vec, depth, agent_id, filters)
            rankings.append([mid for mid, _ in dense])
            sparse = self.store.keyword_search(user_id, terms(query), depth, agent_id, filters)
            rankings.append([mid for mid, _ in sparse])
        return rrf(rankings)

    def subject_terms(self, user_id: str, agent_id: str | None = None) -> set[str]:
        """The query terms of the name most of the person's facts open with (none
        if they do not name the person)."""
        key, now = (user_id, agent_id), time.monotonic()
        known = self._names.get(key)
        if known is not None and now - known[0] < NAME_TTL:
            return known[1]
        facts = self.store.list_memories(user_id, agent_id, limit=NAME_SAMPLE)
        name = leading_name([m.content for m in facts])
        found = {t.lower() for t in terms(name)} if name else set()
        self._names.pop(key, None)
        self._names[key] = (now, found)
        if len(self._names) > NAME_CACHE:
            del self._names[next(iter(self._names))]  # the longest unread
        return found

    def query_terms(self, query: str, user_id: str, agent_id: str | None = None) -> list[str]:
        """The keyword query: the query's terms without the person's name (all of
        them when the query is nothing but the name)."""
        words = terms(query)
        subject = self.subject_terms(user_id, agent_id) if words else set()
        rest = [w for w in words if w.lower() not in subject]
        return rest or words

    def search(
        self,
        query: str,
        user_id: str,
        *,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        tiers: Tiers = "all",
    ) -> list[SearchHit]:
        if not query.strip() or limit <= 0:
            return []
        fact, episode = self._rankings(
            query,
            user_id,
            self.depth,
            agent_id,
            filters,
            tiers in ("all", "facts"),
            tiers in ("all", "episodes"),
        )
        return share_slots(self._fact_hits(fact, limit), self._episode_hits(episode, limit), limit)

    def _rankings(
        self,
        query: str,
        user_id: str,
        depth: int,
        agent_id: str | None,
        filters: SearchFilters | None,
        facts: bool,
        episodes: bool,
    ) -> tuple[TierRanking, TierRanking]:
        """Each tier's dense and keyword rankings for `query`, `depth` deep."""
        vector = self.embedder.embed([query])[0]
        words = self.query_terms(query, user_id, agent_id)
        return self.store.tier_rankings(
            user_id, vector, words, depth, agent_id, filters, facts=facts, episodes=episodes
        )

    def beside(
        self,
        query: str,
        user_id: str,
        *,
        limit: int = 20,
        facts: int = 10,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        """What the answerer reads: the `limit` raw turns a plain search over them
        finds (by embedding cosine, as the `retrieval` baseline ranks them), and
        beside them the best `facts` facts (dense and keyword rankings fused). The
        facts add to the turns and take none of their places, so adding them cannot
        lose a turn that raw search alone would have shown. Turns first, then facts."""
        if not query.strip() or limit <= 0:
            return []
        fact, episode = self._rankings(
            query, user_id, max(self.depth, limit * 2), agent_id, filters, facts > 0, True
        )
        turns = self._episode_hits(TierRanking(dense=episode.dense), limit)
        return turns + (self._fact_hits(fact, facts) if facts > 0 else [])

    def _fact_hits(self, ranked: TierRanking, limit: int) -> list[SearchHit]:
        """The fact tier's best `limit`: dense and keyword rankings fused."""
        # deeper than `limit`: a memory a later fact outdated (invalid_at) or whose
        # expiry has passed (expires_at) is left out
        fused = rrf([[m for m, _ in ranked.dense], [m for m, _ in ranked.keywords]])[: limit * 2]
        if not fused:
            return []
        found = {m.id: m for m in self.store.get_many([i for i, _ in fused])}
        now = utcnow()
        hits = [
            SearchHit(memory=found[i], score=sc)
            for i, sc in fused
            if i in found and found[i].invalid_at is None and not found[i].expired(now)
        ]
        return hits[:limit]

    def _episode_hits(self, ranked: TierRanking, limit: int) -> list[SearchHit]:
        """The episode tier's best `limit`, a turn repeated word for word shown once."""
        # deeper than `limit`: dialogues repeat turns verbatim
        fused = rrf([[e for e, _ in ranked.dense], [e for e, _ in ranked.keywords]])[: limit * 2]
        if not fused:
            return []
        found = {e.id: e for e in self.store.get_episodes([i for i, _ in fused])}
        hits: list[SearchHit] = []
        said: set[tuple[str, str]] = set()
        for i, sc in fused:
            ep = found.get(i)
            if ep is None or (ep.speaker, ep.content) in said:
                continue
            said.add((ep.speaker, ep.content))
            hits.append(SearchHit.of_episode(ep, sc))
        return hits[:limit]


def share_slots(facts: list[SearchHit], episodes: list[SearchHit], limit: int) -> list[SearchHit]:
    """The best of each tier, half the slots each (rounded down: the odd slot, and
    the slots a tier with fewer hits leaves, go to the best scores). Best first."""
    half = limit // 2
    chosen = facts[:half] + episodes[:half]
    rest = sorted(facts[half:] + episodes[half:], key=lambda h: -h.score)
    chosen += rest[: limit - len(chosen)]
    return sorted(chosen, key=lambda h: -h.score)
