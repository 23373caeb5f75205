"""Hybrid retrieval: dense (embedding cosine) and sparse (BM25 over FTS) rankings,
fused by reciprocal rank fusion, which needs no score calibration between them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.store.base import Store
from deltamem.text import terms
from deltamem.types import SearchFilters, SearchHit

RRF_K = 60


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

    def search(
        self,
        query: str,
        user_id: str,
        *,
        limit: int = 20,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        if not query.strip():
            return []
        fused = self.rank([query], user_id, agent_id=agent_id, filters=filters)[:limit]
        scores = dict(fused)
        return [
            SearchHit(memory=m, score=scores[m.id])
            for m in self.store.get_many([mid for mid, _ in fused])
        ]
