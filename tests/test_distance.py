"""Memory-state distance (SPEC §5): every formula on cases worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.train.distance import (
    fidelity,
    gold_keywords,
    keyword_in,
    reward,
    state_distance,
)


def vecs(*rows: tuple[float, ...]) -> np.ndarray:
    return np.array(rows, dtype=float)


def test_identical_states_are_distance_zero_and_reward_one() -> None:
    d = state_distance(["A likes tea."], ["A likes tea."], embed=lambda t: 1 / 0)
    assert d.delta_pred == [] and d.delta_target == []
    assert d.r_trans == 1.0 and d.dist_plus == 0 and d.dist_minus == 0


def test_both_empty_is_one() -> None:
    assert state_distance([], []).r_trans == 1.0


def test_empty_prediction_scores_zero() -> None:
    d = state_distance([], ["Ann moved to Oslo."])
    assert d.r_trans == pytest.approx(0.0)
    assert d.dist_plus == 0 and d.dist_minus == 1


def test_empty_target_scores_zero() -> None:
    d = state_distance(["Ann moved to Oslo."], [])
    assert d.r_trans == pytest.approx(0.0)
    assert d.dist_plus == 1 and d.dist_minus == 0


def test_whitespace_only_difference_is_exact_match() -> None:
    d = state_distance(["Ann  moved to Oslo. "], ["Ann moved to Oslo."])
    assert d.delta_pred == [] and d.r_trans == 1.0


def test_hand_worked_case() -> None:
    # shared entry S cancels; Δpred = [p0, p1], Δtarget = [t0, t1, t2]
    pred = ["shared", "Ann works at Acme in Oslo", "Ann owns a red bike"]
    target = ["shared", "Ann works at Acme in Bergen", "Ann has a dog", "Ann owns a bike"]
    kws = [["x"], ["Acme", "Bergen"], ["dog"], ["bike", "red"]]
    # cosine: p0~t0 = 0.9, p1~t2 = 0.8, p1~t1 = 0.6 → Hungarian picks (p0,t0),(p1,t2)
    pv = vecs((1, 0, 0), (1, 0, 0), (0, 1, 0))
    a, b = 0.9, 0.8
    tv = vecs(
        (1, 0, 0),
        (a, np.sqrt(1 - a * a), 0),
        (0, 0.6, 0.8),
        (0, b, np.sqrt(1 - b * b)),
    )
    d = state_distance(pred, target, target_keywords=kws, pred_vectors=pv, target_vectors=tv)
    assert [(p.pred, p.target) for p in d.pairs] == [(0, 0), (1, 2)]
    # s(p0,t0) = Acme yes, Bergen no = 1/2 ; s(p1,t2) = bike yes, red yes = 1
    assert d.fidelity == pytest.approx(1.5)
    assert d.dist_plus == pytest.approx(2 - 1.5)
    assert d.dist_minus == pytest.approx(3 - 1.5)
    assert d.precision == pytest.approx(0.75)
    assert d.recall == pytest.approx(0.5)
    assert d.r_trans == pytest.approx(2 * 0.75 * 0.5 / 1.25)


def test_threshold_drops_weak_pairs() -> None:
    pv = vecs((1, 0))
    tv = vecs((0.7, np.sqrt(1 - 0.49)))
    d = state_distance(
        ["a b"], ["a b c"], pred_vectors=pv, target_vectors=tv, target_keywords=[["a"]]
    )
    assert d.pairs == [] and d.r_trans == pytest.approx(0.0)
    d = state_distance(
        ["a b"], ["a b c"], pred_vectors=pv, target_vectors=tv, target_keywords=[["a"]], tau=0.5
    )
    assert len(d.pairs) == 1 and d.r_trans == pytest.approx(1.0)


def test_weak_pairs_cannot_outbid_a_strong_one() -> None:
    # cosines p0~t0 0.80, p0~t1 0.60, p1~t0 0.74, p1~t1 0.10: the largest sum over
    # all matchings (p0-t1, p1-t0: 1.34) has no pair at tau 0.75; among admissible
    # pairs only p0-t0 is left, and it is kept
    tv = vecs((1, 0, 0), (0, 1, 0))
    pv = vecs((0.8, 0.6, 0), (0.74, 0.1, np.sqrt(1 - 0.74**2 - 0.1**2)))
    pred = ["Ann reads adventure novels", "Ann reads"]
    target = ["Ann likes adventure novels", "Ann likes books"]
    kws = [["adventure"], ["books"]]
    d = state_distance(pred, target, pred_vectors=pv, target_vectors=tv, target_keywords=kws)
    assert [(p.pred, p.target) for p in d.pairs] == [(0, 0)]
    assert d.pairs[0].similarity == pytest.approx(0.8)
    # one more predicted fact does not cost the match the first one made alone
    alone = state_distance(
        pred[:1], target, pred_vectors=pv[:1], target_vectors=tv, target_keywords=kws
    )
    assert alone.fidelity == d.fidelity == pytest.approx(1.0)


def test_a_vetoed_pair_leaves_its_target_to_another() -> None:
    pv, tv = vecs((1, 0), (0.8, 0.6)), vecs((1, 0))
    d = state_distance(
        ["A tea x", "A tea y"],
        ["A tea"],
        pred_vectors=pv,
        target_vectors=tv,
        target_keywords=[["tea"]],
        unexpected_update=[True, False],
    )
    assert [(p.pred, p.target) for p in d.pairs] == [(1, 0)]


def test_unexpected_update_flag_and_predicate_drop_pairs() -> None:
    pv, tv = vecs((1, 0)), vecs((1, 0))
    base = dict(pred_vectors=pv, target_vectors=tv, target_keywords=[["tea"]])
    assert state_distance(["A tea x"], ["A tea"], **base).r_trans == pytest.approx(1.0)
    flagged = state_distance(["A tea x"], ["A tea"], unexpected_update=[True], **base)
    assert flagged.pairs == [] and flagged.r_trans == pytest.approx(0.0)
    vetoed = state_distance(["A tea x"], ["A tea"], exclude_pair=lambda p, t: True, **base)
    assert vetoed.pairs == []


def test_embed_callable_is_used_on_delta_only() -> None:
    seen: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        seen.append(texts)
        return np.ones((len(texts), 3))

    d = state_distance(
        ["same", "Bo likes jazz"],
        ["same", "Bo loves jazz"],
        embed=embed,
        target_keywords=[["s"], ["jazz", "loves"]],
    )
    assert seen == [["Bo likes jazz", "Bo loves jazz"]]
    assert d.fidelity == pytest.approx(0.5)


def test_keyword_matching() -> None:
    assert keyword_in("Martin", "Martin's job title changed")
    assert keyword_in("senior director", "now a Senior Director at Huaxin")
    assert not keyword_in("director", "the directorate")
    assert fidelity("anything", []) == 1.0
    assert gold_keywords("Martin Mark moved to Columbus in 2029.") == gold_keywords(
        "Martin Mark moved to Columbus in 2029."
    )
    assert "2029" in gold_keywords("Martin Mark moved to Columbus in 2029.")


def test_misaligned_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        state_distance(["a"], ["b"], target_keywords=[])
    with pytest.raises(ValueError):
        state_distance(["a"], ["b"])  # no way to compare


def test_reward_weights() -> None:
    assert reward(1, 1, 1) == pytest.approx(1.0)
    assert reward(1, 0, 0.5) == pytest.approx(0.1 + 0.4)
    assert reward(0, 0, 0) == 0


def test_missing_keywords_are_derived_from_the_gold_text() -> None:
    pv, tv = vecs((1, 0)), vecs((1, 0))
    target = "Martin Mark moved to Columbus in 2029."
    # derived keywords of the target: none of them is in "Someone left."
    d = state_distance(
        ["Someone left."], [target], target_keywords=[[]], pred_vectors=pv, target_vectors=tv
    )
    assert len(d.pairs) == 1 and d.fidelity == pytest.approx(0.0)
    d = state_distance(
        ["Martin Mark went to Columbus in 2029."], [target], pred_vectors=pv, target_vectors=tv
    )
    kws = gold_keywords(target)
    found = sum(k in {"martin", "mark", "columbus", "2029"} for k in kws)
    assert d.fidelity == pytest.approx(found / len(kws))
