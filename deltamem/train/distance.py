"""Memory-state distance and reward (SPEC §5, DeltaMem §3.3).

How far is a predicted memory state from a target state? Entries both states
share exactly cost nothing. The rest (`Δpred`, `Δtarget`) are aligned one to one
by embedding cosine (Hungarian assignment, maximising total similarity) among the
admissible pairs only: pairs below `tau`, and pairs whose predicted side is an
update of a memory the target did not update, are out of the matching before it is
made (DeltaMem filters them "in Γ", the set of matchings). Dropping them after the
assignment instead lets two weak pairs outbid a strong one: a fact near one target
and loosely near another could be given to the second, below `tau`, and both
targets go unmatched, so one more predicted fact could lower recall. Each pair
earns `s_ij`, the share of the target entry's keywords found in the predicted text,
so a near-paraphrase that loses a name or a number earns partial credit only.

    dist+ = |Δpred| − Σ s_ij          (soft false positives)
    dist− = |Δtarget| − Σ s_ij        (soft misses)
    P = Σ s_ij / |Δpred|,  R = Σ s_ij / |Δtarget|,  r_trans = 2PR / (P + R)

Everything is a pure function of strings, keywords and vectors; the embedder is
passed in (any callable `list[str] -> (n, d) array`), or vectors are given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from deltamem.text import keywords as text_keywords
from deltamem.text import words

EmbedFn = Callable[[list[str]], np.ndarray]
PairFilter = Callable[[str, str], bool]

DEFAULT_TAU = 0.75
EPS = 1e-8
W_FORMAT, W_RETRIEVAL, W_TRANS = 0.1, 0.1, 0.8


@dataclass(frozen=True)
class Pair:
    """One kept substitution: Δpred[pred] ↔ Δtarget[target]."""

    pred: int
    target: int
    similarity: float
    fidelity: float


@dataclass
class StateDistance:
    delta_pred: list[str]
    delta_target: list[str]
    pairs: list[Pair] = field(default_factory=list)
    fidelity: float = 0.0  # Σ s_ij over kept pairs
    dist_plus: float = 0.0
    dist_minus: float = 0.0
    precision: float = 1.0
    recall: float = 1.0
    r_trans: float = 1.0


def _key(text: str) -> str:
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    out = []
    for w in words(text):
        lw = w.lower().replace("’", "'")
        if lw.endswith("'s"):
            lw = lw[:-2]
        out.append(lw)
    return out


def keyword_in(keyword: str, text: str) -> bool:
    """A keyword (word or phrase) occurs in `text` as whole tokens, case-insensitively;
    a possessive "'s" does not hide a name."""
    kw = _tokens(keyword)
    if not kw:
        return False
    toks = _tokens(text)
    n = len(kw)
    return any(toks[i : i + n] == kw for i in range(len(toks) - n + 1))


def fidelity(pred_text: str, target_keywords: Sequence[str]) -> float:
    """s_ij: the share of the target's keywords present in the predicted text.
    A target without keywords cannot be checked lexically: it gets full credit."""
    kws = [k for k in target_keywords if _tokens(k)]
    if not kws:
        return 1.0
    return sum(keyword_in(k, pred_text) for k in kws) / len(kws)


def gold_keywords(text: str, limit: int = 5) -> list[str]:
    """Deterministic keywords for a gold sentence that came without any."""
    return text_keywords(text, limit=limit)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("vectors must be a 2-D array")
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _dedupe(texts: Sequence[str]) -> dict[str, int]:
    """Normal form -> index of its first occurrence."""
    seen: dict[str, int] = {}
    for i, t in enumerate(texts):
        seen.setdefault(_key(t), i)
    return seen


def soft_f1(
    matched: float, n_pred: int, n_target: int, eps: float = EPS
) -> tuple[float, float, float]:
    """(P, R, F1) from a soft true-positive count; both sides empty -> (1, 1, 1)."""
    if n_pred == 0 and n_target == 0:
        return 1.0, 1.0, 1.0
    p = matched / (n_pred + eps)
    r = matched / (n_target + eps)
    return p, r, 2 * p * r / (p + r + eps)


def _admissible(
    phi: np.ndarray,
    tau: float,
    dp: list[int],
    dt: list[int],
    pred: Sequence[str],
    target: Sequence[str],
    unexpected_update: Sequence[bool] | None,
    exclude_pair: PairFilter | None,
) -> np.ndarray:
    """Which (Δpred, Δtarget) pairs may be matched: similar enough, not from an
    unexpected update, not vetoed."""
    ok = phi >= tau
    if unexpected_update is not None:
        ok[[a for a, i in enumerate(dp) if unexpected_update[i]], :] = False
    if exclude_pair is not None:
        for a, b in zip(*np.nonzero(ok), strict=True):
            if exclude_pair(pred[dp[a]], target[dt[b]]):
                ok[a, b] = False
    return ok


def state_distance(
    pred: Sequence[str],
    target: Sequence[str],
    *,
    target_keywords: Sequence[Sequence[str]] | None = None,
    embed: EmbedFn | None = None,
    pred_vectors: np.ndarray | None = None,
    target_vectors: np.ndarray | None = None,
    unexpected_update: Sequence[bool] | None = None,
    exclude_pair: PairFilter | None = None,
    tau: float = DEFAULT_TAU,
    eps: float = EPS,
) -> StateDistance:
    """Distance between a predicted and a target memory state (lists of sentences).

    `target_keywords[j]` are target j's keywords; where none are given (no list,
    or an empty entry) they are derived deterministically with `gold_keywords`.
    Similarity comes from `pred_vectors`/`target_vectors` (rows aligned with
    `pred`/`target`) or from `embed`. `unexpected_update[i]` marks pred[i] as an
    update of a memory the target did not update; `exclude_pair(pred, target)`
    vetoes any other pair. Both, like `tau`, keep a pair out of the matching
    before the assignment is made.
    """
    if target_keywords is not None and len(target_keywords) != len(target):
        raise ValueError("target_keywords must align with target")
    if unexpected_update is not None and len(unexpected_update) != len(pred):
        raise ValueError("unexpected_update must align with pred")
    pred_idx, target_idx = _dedupe(pred), _dedupe(target)
    dp = [i for k, i in pred_idx.items() if k not in target_idx]
    dt = [j for k, j in target_idx.items() if k not in pred_idx]
    out = StateDistance(delta_pred=[pred[i] for i in dp], delta_target=[target[j] for j in dt])
    matched = 0.0
    if dp and dt:
        if pred_vectors is not None and target_vectors is not None:
            pv, tv = np.asarray(pred_vectors)[dp], np.asarray(target_vectors)[dt]
        elif embed is not None:
            vecs = np.asarray(embed(out.delta_pred + out.delta_target))
            pv, tv = vecs[: len(dp)], vecs[len(dp) :]
        else:
            raise ValueError("give either embed or both pred_vectors and target_vectors")
        phi = _unit(pv) @ _unit(tv).T
        admissible = _admissible(phi, tau, dp, dt, pred, target, unexpected_update, exclude_pair)
        # an inadmissible pair weighs nothing, so no matching gains by choosing it
        rows, cols = linear_sum_assignment(np.where(admissible, phi, 0.0), maximize=True)
        for a, b in zip(rows.tolist(), cols.tolist(), strict=True):
            if not admissible[a, b]:
                continue
            sim = float(phi[a, b])
            given = target_keywords[dt[b]] if target_keywords is not None else None
            kws = list(given) if given else gold_keywords(target[dt[b]])
            s = fidelity(pred[dp[a]], kws)
            out.pairs.append(Pair(a, b, sim, s))
            matched += s
    out.fidelity = matched
    out.dist_plus = len(dp) - matched
    out.dist_minus = len(dt) - matched
    out.precision, out.recall, out.r_trans = soft_f1(matched, len(dp), len(dt), eps)
    return out


def r_trans(pred: Sequence[str], target: Sequence[str], **kwargs: Any) -> float:
    return state_distance(pred, target, **kwargs).r_trans


def reward(r_format: float, r_retrieval: float, r_trans: float) -> float:
    """r = 0.1·r_format + 0.1·r_retrieval + 0.8·r_trans."""
    return W_FORMAT * r_format + W_RETRIEVAL * r_retrieval + W_TRANS * r_trans
