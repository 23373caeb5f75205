"""The episode tier: a session's turns are indexed with its log entry, searched beside
the facts, kept through replay, forgotten with the user, and indexed once for a store
written before the tier existed."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from fakes import DIM, SESSION, T0, ScriptedLLM, add, ops, session, undo_sqlite_migration_004, unit

from deltamem.embed import Embedder
from deltamem.episodes import episode_id, is_episode_id, session_episodes
from deltamem.memory import Memory
from deltamem.store.base import PlannedEpisode, Store, StoreError
from deltamem.store.sqlite import SQLiteStore
from deltamem.types import Message, SearchFilters, SessionRecord


def planned(rec: SessionRecord, *vectors: np.ndarray) -> list[PlannedEpisode]:
    """The session's episodes with hand-made vectors (one per turn)."""
    return [PlannedEpisode(e, v) for e, v in zip(session_episodes(rec), vectors, strict=True)]


def two_turns(session_id: str, user_id: str = "u1", days: int = 0) -> SessionRecord:
    rec = session(session_id, user_id, timestamp=T0 + timedelta(days=days))
    return rec.model_copy(
        update={
            "messages": [
                Message(role="user", content="My beagle Rufus chewed the sofa."),
                Message(role="assistant", content="Oh no, poor sofa!"),
            ]
        }
    )


# --- store level, both backends --------------------------------------------------------
def test_turns_are_indexed_with_the_log_entry_and_only_once(store: Store) -> None:
    rec = two_turns("s1")
    store.log_session(rec, planned(rec, unit(1, 0), unit(0, 1)))
    assert store.count_episodes("u1") == 2
    assert store.unindexed_sessions() == []
    store.log_session(rec, planned(rec, unit(1, 0), unit(0, 1)))  # logged again: a no-op
    assert store.count_episodes("u1") == 2
    assert store.index_episodes(rec, planned(rec, unit(1, 0), unit(0, 1))) == 0
    assert store.count_episodes("u1") == 2


def test_episode_search_dense_keyword_and_filters(store: Store) -> None:
    a, b = two_turns("s1"), two_turns("s2", days=10)
    store.log_session(a, planned(a, unit(1, 0), unit(0, 1)))
    store.log_session(b, planned(b, unit(1, 1), unit(0, 0, 1)))
    other = two_turns("s1", user_id="u2")
    store.log_session(other, planned(other, unit(1, 0), unit(0, 1)))

    dense = store.episode_dense_search("u1", unit(1, 0), 10)
    assert [i for i, _ in dense][:2] == [a_id(a, 0), a_id(b, 0)]
    assert all(i.startswith("ep_") for i, _ in dense)
    assert len(dense) == 4  # u2's turns are not u1's

    words = store.episode_keyword_search("u1", ["sofa"], 10)
    assert {i for i, _ in words} == {a_id(a, 0), a_id(a, 1), a_id(b, 0), a_id(b, 1)}
    in_s2 = store.episode_keyword_search(
        "u1", ["beagle"], 10, filters=SearchFilters(session_id="s2")
    )
    assert [i for i, _ in in_s2] == [a_id(b, 0)]
    late = SearchFilters(since=T0 + timedelta(days=5))
    assert {i for i, _ in store.episode_dense_search("u1", unit(1, 0), 10, filters=late)} == {
        a_id(b, 0),
        a_id(b, 1),
    }
    typed = SearchFilters(memory_type="persona")  # episodes have no memory type
    assert store.episode_dense_search("u1", unit(1, 0), 10, filters=typed) == []
    assert store.episode_keyword_search("u1", ["sofa"], 10, filters=typed) == []

    got = store.get_episodes([a_id(b, 1), a_id(a, 0), "ep_missing"])
    assert [(e.session_id, e.turn, e.role) for e in got] == [
        ("s2", 1, "assistant"),
        ("s1", 0, "user"),
    ]
    assert got[1].content == "My beagle Rufus chewed the sofa."
    assert got[1].timestamp == T0


def a_id(rec: SessionRecord, turn: int) -> str:
    return episode_id(rec.user_id, rec.agent_id, rec.session_id, turn)


def test_reset_keeps_episodes_for_replay_and_forgets_them_with_the_user(store: Store) -> None:
    rec = two_turns("s1")
    store.log_session(rec, planned(rec, unit(1, 0), unit(0, 1)))
    other = two_turns("s1", user_id="u2")
    store.log_session(other, planned(other, unit(1, 0), unit(0, 1)))
    store.reset("u1", keep_log=True)
    assert store.count_episodes("u1") == 2
    assert len(store.episode_dense_search("u1", unit(1, 0), 10)) == 2
    store.reset("u1")
    assert store.count_episodes("u1") == 0
    assert store.episode_dense_search("u1", unit(1, 0), 10) == []  # the cached matrix too
    assert store.episode_keyword_search("u1", ["sofa"], 10) == []
    assert store.count_episodes("u2") == 2


def test_a_session_logged_without_episodes_waits_to_be_indexed(store: Store) -> None:
    rec = two_turns("s1")
    store.log_session(rec)
    assert [r.session_id for r in store.unindexed_sessions()] == ["s1"]
    assert store.index_episodes(rec, planned(rec, unit(1, 0), unit(0, 1))) == 2
    assert store.unindexed_sessions() == []
    assert store.count_episodes("u1") == 2


def test_a_bad_episode_leaves_neither_the_log_entry_nor_any_episode(store: Store) -> None:
    rec = two_turns("s1")
    bad = planned(rec, unit(1, 0), np.ones(DIM + 1, dtype=np.float32))
    with pytest.raises(StoreError):
        store.log_session(rec, bad)
    assert store.get_session("u1", "s1") is None
    assert store.count_episodes("u1") == 0


# --- through Memory, with the real embedder ----------------------------------------------
def test_search_finds_what_the_manager_missed_in_the_users_words(
    mem: Memory, llm: ScriptedLLM
) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    mem.add(
        [
            {"role": "user", "content": "I adopted a beagle named Rufus."},
            {"role": "assistant", "content": "Lovely! What else is new?"},
            {"role": "user", "content": "I started learning the cello on Tuesdays."},
        ],
        user_id="alice",
        session_id="s1",
        timestamp=T0,
    )
    hits = mem.search("cello lessons", user_id="alice", limit=5)
    assert hits[0].kind == "episode"
    assert hits[0].memory.content == "I started learning the cello on Tuesdays."
    assert hits[0].speaker == "user"
    assert hits[0].memory.session_id == "s1" and hits[0].memory.turns == [2]
    assert {h.kind for h in hits} == {"fact", "episode"}
    facts = mem.search("cello lessons", user_id="alice", tiers="facts")
    assert [h.kind for h in facts] == ["fact"]
    only_turns = mem.search("beagle", user_id="alice", tiers="episodes")
    assert only_turns and all(is_episode_id(h.memory.id) for h in only_turns)
    assert [m.content for m in mem.get_all(user_id="alice")] == [
        "Alice adopted a beagle named Rufus."
    ]
    assert mem.search("cello", user_id="bob") == []


def test_answer_shows_facts_and_excerpts_apart(
    make_memory: Callable[..., Memory], llm: ScriptedLLM
) -> None:
    mem = make_memory(llm, dataclasses.replace(SESSION, beside="facts"))
    llm.push(ops(add("Alice lives in Porto.")))
    mem.add(
        [{"role": "user", "content": "I moved to Porto. I teach the cello there."}],
        user_id="alice",
        session_id="s1",
        timestamp=T0,
    )
    llm.push("Alice lives in Porto.")
    mem.answer("Where does Alice live?", user_id="alice")
    prompt = llm.requests[-1]["messages"][1]["content"]
    facts, excerpts = prompt.split("Conversation excerpts")
    assert "Alice lives in Porto. (said 13 February 2029)" in facts
    assert "user: I moved to Porto. I teach the cello there. (said 13 February 2029)" in excerpts


def test_the_answerer_lists_hits_by_date_or_as_ranked() -> None:
    from deltamem.answer import Answerer
    from deltamem.types import MemoryItem, SearchHit

    def hit(text: str, days: int) -> SearchHit:
        at = T0 + timedelta(days=days)
        item = MemoryItem(
            id=text[:3], user_id="u", content=text, timestamp=at, created_at=at, updated_at=at
        )
        return SearchHit(memory=item, score=1.0 / (days + 2), kind="fact")

    ranked = [hit("Ana works at Fernhill Labs.", 9), hit("Ana works at Northwind Bank.", 0)]
    by_date = Answerer(ScriptedLLM()).prompt("Where does Ana work?", ranked)[1]["content"]
    assert "(fact (date said)), oldest first:" in by_date
    assert by_date.index("Northwind") < by_date.index("Fernhill")
    by_rank = Answerer(ScriptedLLM(), order="relevance").prompt("Where does Ana work?", ranked)
    text = by_rank[1]["content"]
    assert "most relevant first:" in text and text.index("Fernhill") < text.index("Northwind")
    # newest first: where a small model looks first (the relevance order reversed here)
    ranked.reverse()
    newest = Answerer(ScriptedLLM(), order="newest").prompt("Where does Ana work?", ranked)
    text = newest[1]["content"]
    assert "newest first:" in text and text.index("Fernhill") < text.index("Northwind")


def test_replay_keeps_the_episodes(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice plays the cello.")))
    mem.add([{"role": "user", "content": "I play the cello."}], user_id="alice", session_id="s1")
    llm.push(ops(add("Alice plays the cello.")))
    mem.replay("alice")
    assert mem.store.count_episodes("alice") == 1
    mem.reset("alice")
    assert mem.store.count_episodes("alice") == 0


def test_a_store_from_before_the_tier_is_indexed_once_on_open(
    tmp_path: Path, embedder: Embedder, make_memory: Callable[..., Memory]
) -> None:
    path = tmp_path / "old.db"
    llm = ScriptedLLM(default=ops())
    store = SQLiteStore(path, dim=embedder.dim)
    with Memory(llm=llm, embedder=embedder, store=store, config=SESSION) as m:
        m.add([{"role": "user", "content": "I keep bees in Ghent."}], user_id="a", session_id="s1")
        m.add([{"role": "user", "content": "I sold my car."}], user_id="b", session_id="s1")
    with sqlite3.connect(path) as db:  # the store as it was before migration 004
        undo_sqlite_migration_004(db)
    for _ in range(2):  # opening again indexes nothing twice
        with Memory(llm=llm, embedder=embedder, store=SQLiteStore(path, dim=embedder.dim)) as m:
            assert m.store.unindexed_sessions() == []
            assert m.store.count_episodes("a") == 1 and m.store.count_episodes("b") == 1
            hits = m.search("bees", user_id="a")
            assert [h.memory.content for h in hits] == ["I keep bees in Ghent."]


def test_a_turn_repeated_word_for_word_is_shown_once(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops())
    said = "I started learning the cello on Tuesdays."
    mem.add(
        [
            {"role": "user", "content": said},
            {"role": "assistant", "content": "Nice."},
            {"role": "user", "content": said},
        ],
        user_id="alice",
        session_id="s1",
    )
    hits = mem.search("cello", user_id="alice", tiers="episodes", limit=5)
    assert [h.memory.content for h in hits].count(said) == 1


# --- one search over two tiers -------------------------------------------------------------
def test_a_question_naming_the_person_still_finds_their_own_words(
    mem: Memory, llm: ScriptedLLM
) -> None:
    # the manager names the person in every fact; the person never says their name
    facts = [
        f"Martin Mark {what}."
        for what in (
            "is a team player",
            "enjoys music",
            "is a Senior Director",
            "likes horror films",
            "paints on weekends",
            "has a cat",
            "walks to work",
            "reads poetry",
        )
    ]
    llm.push(ops(*(add(f) for f in facts)))
    mem.add(
        [
            {"role": "user", "content": "My middle name is Joshua, after my grandfather."},
            {"role": "assistant", "content": "A fine name, Martin!"},
            {"role": "user", "content": "I just got promoted."},
        ],
        user_id="martin",
        session_id="s1",
        timestamp=T0,
    )
    assert mem.searcher.query_terms("What is Martin Mark's middle name?", "martin") == [
        "middle",
        "name",
    ]
    # nothing but the name: the name is the query
    assert mem.searcher.query_terms("Martin Mark", "martin") == ["martin", "mark"]
    hits = mem.search("What is Martin Mark's middle name?", user_id="martin", limit=4)
    assert len(hits) == 4
    assert [h.kind for h in hits].count("fact") == 2  # half the slots each
    assert "My middle name is Joshua, after my grandfather." in [h.memory.content for h in hits]
    # a tier with fewer hits leaves its slots to the other
    assert len(mem.search("middle name", user_id="martin", limit=12)) == 11
    assert [h.kind for h in mem.search("middle name", user_id="martin", limit=12)].count(
        "episode"
    ) == 3


def test_each_tier_keeps_half_the_slots_best_first() -> None:
    from deltamem.retrieval.hybrid import share_slots
    from deltamem.types import MemoryItem, SearchHit

    def hit(i: int, score: float) -> SearchHit:
        item = MemoryItem(
            id=f"m{i}", user_id="u", content=f"fact {i}", timestamp=T0, created_at=T0, updated_at=T0
        )
        return SearchHit(memory=item, score=score)

    facts = [hit(i, 1.0 - i / 100) for i in range(10)]  # every fact outscores every turn
    turns = [hit(100 + i, 0.5 - i / 100) for i in range(10)]
    chosen = share_slots(facts, turns, 6)
    assert [h.memory.id for h in chosen] == ["m0", "m1", "m2", "m100", "m101", "m102"]
    assert [h.memory.id for h in share_slots(facts, turns[:1], 6)] == [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        "m100",
    ]
    assert share_slots([], [], 5) == []
    # the odd slot goes to the best score: one slot is the best hit of either tier
    assert [h.memory.id for h in share_slots(facts, turns, 1)] == ["m0"]
    assert [h.memory.id for h in share_slots(facts, turns, 5)] == ["m0", "m1", "m2", "m100", "m101"]
