"""Judge-free matching of gold facts against retrieved or extracted text, by
embedding cosine (the same threshold as the state distance)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deltamem.embed import Embedder
from deltamem.train.distance import DEFAULT_TAU


def best_similarity(embedder: Embedder, gold: Sequence[str], found: Sequence[str]) -> list[float]:
    """For each gold text, its highest cosine with any found text (0 when none)."""
    if not gold:
        return []
    if not found:
        return [0.0] * len(gold)
    vecs = embedder.embed([*gold, *found])
    sims = vecs[: len(gold)] @ vecs[len(gold) :].T
    return [float(x) for x in np.max(sims, axis=1)]


def covered(
    embedder: Embedder, gold: Sequence[str], found: Sequence[str], tau: float = DEFAULT_TAU
) -> float | None:
    """Share of gold texts matched by some found text (None without gold)."""
    best = best_similarity(embedder, gold, found)
    return sum(b >= tau for b in best) / len(best) if best else None
