"""Hybrid retrieval: dense (embedding cosine) and sparse (BM25 over FTS) rankings,
fused by reciprocal rank fusion, which needs no score calibration between them.

Two tiers are searched: facts (the memory bank) and episodes (the session log's
raw turns). Their four rankings are fused into one list, each hit saying its kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.episodes import is_episode_id
from deltamem.store.base import Store
from deltamem.text import terms
from deltamem.types import SearchFilters, SearchHit

RRF_K = 60
Tiers = Literal["all", "facts", "episodes"]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = Σ 1 / (k + rank of d in each ranking)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class HybridSearcher:
    def __init__(self, store: Store, embedder: Embedder, depth: int = 40) -> None:
        self.store = store
        self.embedder = embedder
        self.depth = depth  # how deep each ranking goes before fusion

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

    def rank_episodes(
        self,
        query: str,
        vector: np.ndarray,
        user_id: str,
        *,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[list[str]]:
        """The episode tier's dense and sparse rankings for one query."""
        depth = self.depth
        dense = self.store.episode_dense_search(user_id, vector, depth, agent_id, filters)
        sparse = self.store.episode_keyword_search(user_id, terms(query), depth, agent_id, filters)
        return [[eid for eid, _ in dense], [eid for eid, _ in sparse]]

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
        vector = self.embedder.embed([query])[0]
        rankings: list[Sequence[str]] = []
        if tiers in ("all", "facts"):
            dense = self.store.dense_search(user_id, vector, self.depth, agent_id, filters)
            sparse = self.store.keyword_search(user_id, terms(query), self.depth, agent_id, filters)
            rankings += [[m for m, _ in dense], [m for m, _ in sparse]]
        if tiers in ("all", "episodes"):
            rankings += self.rank_episodes(
                query, vector, user_id, agent_id=agent_id, filters=filters
            )
        # deeper than `limit`: turns repeated word for word are shown once
        fused = rrf(rankings)[: limit * 2]
        scores = dict(fused)
        ids = [i for i, _ in fused]
        episode_ids = [i for i in ids if is_episode_id(i)]
        facts = {m.id: m for m in self.store.get_many([i for i in ids if not is_episode_id(i)])}
        episodes = {e.id: e for e in self.store.get_episodes(episode_ids)}
        hits: list[SearchHit] = []
        said: set[tuple[str, str]] = set()
        for i in ids:
            if i in facts:
                hits.append(SearchHit(memory=facts[i], score=scores[i]))
            elif i in episodes:
                ep = episodes[i]
                if (ep.speaker, ep.content) in said:  # dialogues repeat turns verbatim
                    continue
                said.add((ep.speaker, ep.content))
                hits.append(SearchHit.of_episode(ep, scores[i]))
        return hits[:limit]
