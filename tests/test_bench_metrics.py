"""Metric formulas on small cases worked by hand."""

from __future__ import annotations

import math
import sqlite3

import pytest

from deltamem.bench.metrics import halumem as hm
from deltamem.bench.metrics import locomo as lm
from deltamem.porter import stem

# --- Porter -------------------------------------------------------------------------

# Porter's 1980 stems (PyStemmer's "porter"), the ones SQLite FTS5's porter tokenizer
# makes: "ties" → "ti", "skies" → "ski", "dying" → "dy" (nltk's extra rules would say
# tie, sky, die); one- and two-letter words are kept.
PORTER = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "ti",
    "cats": "cat",
    "agreed": "agre",
    "plastered": "plaster",
    "motoring": "motor",
    "sing": "sing",
    "hopping": "hop",
    "falling": "fall",
    "filing": "file",
    "happy": "happi",
    "relational": "relat",
    "conditional": "condit",
    "generalization": "gener",
    "adjustment": "adjust",
    "running": "run",
    "meetings": "meet",
    "adoption": "adopt",
    "hopeful": "hope",
    "goodness": "good",
    "dependent": "depend",
    "effective": "effect",
    "sized": "size",
    "skies": "ski",
    "dying": "dy",
    "journey": "journei",
    "a": "a",
    "is": "is",
}


@pytest.mark.parametrize(("word", "expected"), sorted(PORTER.items()))
def test_porter(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_stems_are_the_terms_fts5_indexes() -> None:
    """sqlite_sql.rankable looks terms up in the FTS5 vocabulary by these stems."""
    words = [*PORTER, "films", "enjoyed", "hopefully", "meeting", "Running", "us"]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5 (c, tokenize = 'porter unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.executemany("INSERT INTO f (rowid, c) VALUES (?, ?)", list(enumerate(words, 1)))
    indexed = {words[doc - 1]: term for doc, term in db.execute("SELECT doc, term FROM v")}
    assert indexed == {w: stem(w) for w in words}


# --- LoCoMo -------------------------------------------------------------------------


def test_normalisation_drops_case_punctuation_articles_and() -> None:
    assert lm.normalize_answer("The Cat, and a DOG!") == "cat dog"
    assert lm.tokens("Running races") == ["run", "race"]


def test_token_f1_by_hand() -> None:
    assert lm.token_f1("7 May 2023", "7 May 2023") == 1.0
    # pred {she, went, to, paris} vs gold {paris}: P = 1/4, R = 1 → F1 = 0.4
    assert lm.token_f1("She went to Paris", "Paris") == pytest.approx(0.4)
    assert lm.token_f1("", "Paris") == 0.0
    assert lm.token_f1("meetings", "meeting") == 1.0  # stemming


def test_category_rules() -> None:
    # cat 1: gold parts "painting" and "hiking"; pred parts "hiking", "swimming"
    # painting → best 0 ; hiking → 1 → mean 0.5
    assert lm.answer_f1("hiking, swimming", "painting, hiking", 1) == pytest.approx(0.5)
    # cat 3: only text before ';'
    assert lm.answer_f1("Psychology", "Psychology; counseling certification", 3) == 1.0
    assert lm.answer_f1("Psychology", "Psychology; counseling", 4) == pytest.approx(2 / 3)
    # cat 5: abstention phrase
    assert lm.answer_f1("That is not mentioned in the conversation.", None, 5) == 1.0
    assert lm.answer_f1("She went to Rome.", None, 5) == 0.0


def test_bleu1_by_hand() -> None:
    assert lm.bleu1("paris", "paris") == 1.0
    # pred 2 tokens, gold 4 tokens, 2 matches: precision 1, BP = exp(1 - 4/2)
    assert lm.bleu1("red car", "red car in garage") == pytest.approx(math.exp(-1))
    # pred longer: clipped precision 1/3, no penalty
    assert lm.bleu1("car car car", "red car") == pytest.approx(1 / 3)
    assert lm.bleu1("", "x") == 0.0


def test_evidence_recall() -> None:
    assert lm.evidence_recall(["D1:3", "D2:1"], ["D1:3", "D9:9"]) == 0.5
    assert lm.evidence_recall([], ["D1:3"]) is None


def test_locomo_aggregate_keeps_category_5_apart() -> None:
    recs = [
        {"category": 1, "f1": 1.0, "bleu1": 1.0, "judge": True, "evidence_recall": 1.0},
        {"category": 2, "f1": 0.0, "bleu1": 0.5, "judge": None, "evidence_recall": 0.0},
        {"category": 5, "f1": 1.0, "bleu1": 0.0, "judge": None, "evidence_recall": None},
    ]
    out = lm.aggregate(recs)
    assert out["f1"] == 0.5 and out["bleu1"] == 0.75 and out["n"] == 2
    assert out["judge"] == 1.0 and out["evidence_recall"] == 0.5
    assert out["by_category"]["adversarial"]["f1"] == 1.0
    assert set(out["by_category"]) == {"multi-hop", "temporal", "adversarial"}


# --- HaluMem ------------------------------------------------------------------------


def point(
    score: int | None,
    importance: float = 1.0,
    distractor: bool = False,
    mtype: str = "Persona Memory",
) -> dict:
    return {
        "kind": "point",
        "score": score,
        "importance": importance,
        "distractor": distractor,
        "memory_type": mtype,
        "session": 0,
    }


def extracted(score: int | None, included: bool | None) -> dict:
    return {"kind": "extracted", "score": score, "included": included}


def test_extraction_metrics_by_hand() -> None:
    points = [
        point(2, 0.5),
        point(1, 1.0),
        point(0, 0.5, mtype="Event Memory"),
        point(0, distractor=True),
        point(2, distractor=True),
    ]
    ext = [extracted(2, True), extracted(1, True), extracted(0, False), extracted(2, False)]
    out = hm.aggregate(points + ext)["extraction"]
    assert out["recall"] == pytest.approx(1 / 3)
    # (0.5·1 + 1·0.5 + 0.5·0) / 2.0 = 0.5
    assert out["weighted_recall"] == pytest.approx(0.5)
    assert out["target_precision"] == pytest.approx((1 + 0.5) / 2)
    assert out["accuracy"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert out["fmr"] == pytest.approx(0.5)
    assert out["f1"] == pytest.approx(2 * (1 / 3) * 0.75 / (1 / 3 + 0.75))
    assert out["by_memory_type"]["Event Memory"]["recall"] == 0.0
    assert out["by_memory_type"]["Persona Memory"]["fmr"] == pytest.approx(0.5)


def test_no_extracted_memories() -> None:
    out = hm.aggregate([point(0), point(0, distractor=True)])["extraction"]
    assert out["recall"] == 0.0 and out["accuracy"] is None
    assert out["target_precision"] is None
    assert out["f1"] == 0.0 and out["fmr"] == 1.0


def test_no_distractors_and_unjudged_items_are_none() -> None:
    out = hm.aggregate([point(2)])["extraction"]
    assert out["fmr"] is None and out["recall"] == 1.0
    skipped = hm.aggregate([point(None), extracted(None, None)])
    assert all(
        skipped["extraction"][k] is None
        for k in ("recall", "weighted_recall", "target_precision", "accuracy", "fmr", "f1")
    )
    assert skipped["update"]["correct"] is None and skipped["qa"]["correct"] is None


def test_no_update_targets() -> None:
    assert hm.aggregate([])["update"] == {
        "correct": None,
        "hallucination": None,
        "omission": None,
        "n": 0,
    }


def test_update_and_qa_shares() -> None:
    recs = [
        {"kind": "update", "verdict": v} for v in ("Correct", "hallucination", "omission", "Other")
    ]
    up = hm.aggregate(recs)["update"]
    assert up == {"correct": 0.25, "hallucination": 0.25, "omission": 0.25, "n": 4}
    qs = [
        {
            "kind": "question",
            "verdict": "correct",
            "question_type": "Basic Fact Recall",
            "session": 0,
        },
        {
            "kind": "question",
            "verdict": "omission",
            "question_type": "Memory Boundary",
            "session": 0,
        },
        {
            "kind": "question",
            "verdict": "correct",
            "question_type": "Memory Boundary",
            "session": 2,
        },
        {"kind": "question", "verdict": None, "question_type": "Memory Boundary", "session": 3},
    ]
    out = hm.aggregate(qs)
    assert out["qa"]["correct"] == pytest.approx(2 / 3) and out["qa"]["n"] == 3
    assert out["qa"]["by_type"]["Memory Boundary"]["omission"] == 0.5
    assert out["qa_by_session"] == [
        {"session": 0, "n": 2, "accuracy": 0.5},
        {"session": 2, "n": 3, "accuracy": pytest.approx(2 / 3)},
    ]


def test_all_unknown_answers() -> None:
    qs = [{"kind": "question", "verdict": "omission", "question_type": "t", "session": 0}] * 3
    qa = hm.aggregate(qs)["qa"]
    assert qa["correct"] == 0.0 and qa["omission"] == 1.0 and qa["hallucination"] == 0.0


def test_state_f1_skips_filler_sessions() -> None:
    recs = [
        {"kind": "session", "state": {"r_trans": 1.0}},
        {"kind": "session", "state": {"r_trans": 0.5}},
        {"kind": "session", "state": {"r_trans": 0.0}, "filler": True},
    ]
    assert hm.aggregate(recs)["extraction"]["state_f1"] == 0.75
    assert hm.aggregate([])["extraction"]["state_f1"] is None
