"""Hybrid retrieval: reciprocal rank fusion of dense and keyword rankings."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from fakes import T0, session, unit

from deltamem.embed import Embedder
from deltamem.retrieval.hybrid import RRF_K, HybridSearcher, rrf
from deltamem.store.base import PlannedWrite, Store
from deltamem.types import SearchFilters


# --- rrf -----------------------------------------------------------------------------
def test_rrf_hand_worked() -> None:
    fused = rrf([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [d for d, _ in fused] == ["b", "c", "a", "d"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)


def test_rrf_small_k_rewards_agreement_less_than_top_rank() -> None:
    # with k=1: a = 1/2 (top of one list); b = 1/3 + 1/3 = 2/3 (second in both)
    fused = rrf([["a", "b"], ["c", "b"]], k=1)
    assert fused[0] == ("b", pytest.approx(2 / 3))
    assert [d for d, _ in fused] == ["b", "a", "c"]


def test_rrf_ties_break_by_the_rankings_not_the_ids_and_empty_input() -> None:
    assert [d for d, _ in rrf([["y"], ["x"]])] == ["y", "x"]  # the first ranking's first
    # ranks 1 and 3 against 3 and 1: the same score, ordered by the first ranking
    assert [d for d, _ in rrf([["b", "z", "a"], ["a", "z", "b"]])] == ["b", "a", "z"]
    assert [d for d, _ in rrf([["a", "z", "b"], ["b", "z", "a"]])] == ["a", "b", "z"]
    assert rrf([]) == []
    assert rrf([[], []]) == []
    assert RRF_K == 60
    assert dict(rrf([["a"]]))["a"] == pytest.approx(1 / 61)


# --- hybrid search with controlled vectors -------------------------------------------------
class TableEmbedder(Embedder):
    """Vectors looked up by text: lets a test decide what 'similar' means."""

    name = "table"
    dim = 384

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.table.get(t, unit(*([0.0] * 9), 1.0)) for t in texts])


def fill(store: Store, items: list[tuple[str, np.ndarray, str | None]], **kw: object) -> list[str]:
    rec, _ = store.log_session(session(**kw))  # type: ignore[arg-type]
    writes = [PlannedWrite("add", c, v, memory_type=t) for c, v, t in items]  # type: ignore[arg-type]
    return [o.memory_id or "" for o in store.apply_session(rec, writes, [])]


def test_finds_by_keyword_when_embeddings_are_unrelated(store: Store) -> None:
    ids = fill(
        store,
        [
            ("Alice enjoys hiking in the Alps.", unit(1, 0), None),
            ("Alice's cat is called Zorro.", unit(0, 1), None),
            ("Alice reads crime novels.", unit(0, 0, 1), None),
        ],
    )
    # the query vector is closest to the hiking memory; only the keyword points at Zorro
    emb = TableEmbedder({"Who is Zorro?": unit(1, 0.1)})
    hits = HybridSearcher(store, emb).search("Who is Zorro?", "u1")
    assert hits[0].memory.id == ids[1]
    assert len(hits) == 3  # the dense ranking still contributes the others
    assert hits[0].score > hits[1].score


def test_finds_by_embedding_when_no_word_matches(store: Store) -> None:
    ids = fill(
        store,
        [
            ("Alice enjoys hiking in the Alps.", unit(1, 0), None),
            ("Alice's cat is called Zorro.", unit(0, 1), None),
        ],
    )
    emb = TableEmbedder({"feline companion": unit(0.1, 1)})
    hits = HybridSearcher(store, emb).search("feline companion", "u1")
    assert [h.memory.id for h in hits] == [ids[1], ids[0]]


def test_keyword_and_dense_agreement_wins(store: Store) -> None:
    ids = fill(
        store,
        [
            ("Alice plays tennis.", unit(1, 0), None),
            ("Alice plays the cello.", unit(0.9, 0.4), None),
            ("Alice owns a cello.", unit(0, 1), None),
        ],
    )
    emb = TableEmbedder({"cello": unit(1, 0.1)})
    # dense: tennis, plays-cello, owns-cello; keyword: the two cello memories
    hits = HybridSearcher(store, emb).search("cello", "u1")
    assert hits[0].memory.id == ids[1]


def test_real_embedder_finds_paraphrase_and_rare_word(store: Store, embedder: Embedder) -> None:
    facts = [
        "Alice owns a golden retriever.",
        "Alice works night shifts as a nurse.",
        "Alice's favourite band is Kraftwerk.",
        "Alice is saving money to buy a flat in Lisbon.",
    ]
    vecs = embedder.embed(facts)
    ids = fill(store, [(f, v, None) for f, v in zip(facts, vecs, strict=True)])
    searcher = HybridSearcher(store, embedder)
    assert searcher.search("Which dog breed does she have?", "u1")[0].memory.id == ids[0]
    assert searcher.search("kraftwerk", "u1")[0].memory.id == ids[2]
    assert searcher.search("Where does she want to purchase property?", "u1")[0].memory.id == ids[3]


def test_search_filters_limit_and_scope(store: Store) -> None:
    a = fill(
        store,
        [
            ("Alice plays the cello.", unit(1, 0), "persona"),
            ("Alice sold her cello.", unit(1, 1), "event"),
        ],
        session_id="s1",
    )
    b = fill(
        store,
        [("Alice bought a new cello.", unit(0, 1), "event")],
        session_id="s2",
        timestamp=T0 + timedelta(days=7),
    )
    fill(store, [("Bob plays the cello.", unit(1, 0), "persona")], session_id="s3", user_id="u2")
    emb = TableEmbedder({"cello": unit(1, 0)})
    searcher = HybridSearcher(store, emb)
    everything = searcher.search("cello", "u1")
    assert {h.memory.id for h in everything} == {*a, *b}
    assert all(h.memory.user_id == "u1" for h in everything)
    assert len(searcher.search("cello", "u1", limit=2)) == 2
    got = searcher.search("cello", "u1", filters=SearchFilters(memory_type="event"))
    assert {h.memory.id for h in got} == {a[1], b[0]}
    got = searcher.search("cello", "u1", filters=SearchFilters(since=T0 + timedelta(days=1)))
    assert [h.memory.id for h in got] == b
    got = searcher.search("cello", "u1", filters=SearchFilters(session_id="s1"))
    assert {h.memory.id for h in got} == set(a)
    assert searcher.search("cello", "nobody") == []
    assert searcher.search("", "u1") == []


def test_hit_scores_are_fused_scores(store: Store) -> None:
    ids = fill(
        store, [("Alice plays the cello.", unit(1, 0), None), ("Alice swims.", unit(0, 1), None)]
    )
    emb = TableEmbedder({"cello": unit(1, 0)})
    hits = HybridSearcher(store, emb).search("cello", "u1")
    assert [h.memory.id for h in hits] == ids
    # cello memory: first in both rankings; swims: second in the dense ranking only
    assert hits[0].score == pytest.approx(2 / 61)
    assert hits[1].score == pytest.approx(1 / 62)


def test_rank_several_queries(store: Store) -> None:
    ids = fill(
        store, [("Alice plays the cello.", unit(1, 0), None), ("Alice swims.", unit(0, 1), None)]
    )
    emb = TableEmbedder({"cello": unit(1, 0), "swimming": unit(0, 1)})
    ranked = HybridSearcher(store, emb).rank(["cello", "swimming"], "u1")
    assert {mid for mid, _ in ranked} == set(ids)
    assert ranked[0][1] == pytest.approx(ranked[1][1])  # each query puts one memory first
