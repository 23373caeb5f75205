"""The store suite: every backend passes it through the abstract `Store` interface.

Only public `Store` methods are used here, so a new backend (PostgreSQL) runs the
same tests by adding its name to the `store` fixture's params in conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from fakes import T0, session, undo_sqlite_migration_004, unit

from deltamem.llm.base import CallRecord
from deltamem.store.base import (
    AmbiguousMemoryId,
    PlannedWrite,
    SessionConflict,
    Store,
    StoreError,
    UnknownMemory,
)
from deltamem.store.common import migration_scripts, prefix_end
from deltamem.types import MemoryItem, Operation, SearchFilters, SessionRecord


def add_w(content: str, vec: np.ndarray | None = None, **kw: object) -> PlannedWrite:
    return PlannedWrite("add", content, unit(1.0) if vec is None else vec, **kw)  # type: ignore[arg-type]


def upd_w(
    memory_id: str, content: str, vec: np.ndarray | None = None, **kw: object
) -> PlannedWrite:
    return PlannedWrite(
        "update",
        content,
        unit(1.0) if vec is None else vec,
        memory_id=memory_id,
        **kw,  # type: ignore[arg-type]
    )


def ingest(store: Store, rec: SessionRecord, *writes: PlannedWrite) -> list[Operation]:
    stored, _ = store.log_session(rec)
    return store.apply_session(stored, list(writes), [])


def seed(store: Store) -> dict[str, str]:
    """Three memories of u1 over two sessions/agents/types, one of u2. Returns ids."""
    s1 = session("s1", timestamp=T0)
    s2 = session("s2", timestamp=T0 + timedelta(days=10), agent_id="bot")
    s3 = session("s3", user_id="u2", timestamp=T0 + timedelta(days=5))
    a = ingest(
        store,
        s1,
        add_w("Alice adopted a beagle named Rufus.", unit(1, 0), memory_type="event"),
        add_w("Alice prefers green tea over coffee.", unit(0, 1), memory_type="persona"),
    )
    b = ingest(
        store,
        s2,
        add_w("Alice's sister Mia lives in Oslo.", unit(0, 0, 1), memory_type="relationship"),
    )
    c = ingest(
        store, s3, add_w("Bob adopted a beagle named Rufus.", unit(1, 0), memory_type="event")
    )
    return {
        "dog": a[0].memory_id or "",
        "tea": a[1].memory_id or "",
        "sister": b[0].memory_id or "",
        "bob": c[0].memory_id or "",
    }


# --- session log --------------------------------------------------------------------
def test_log_session_created_then_idempotent(store: Store) -> None:
    rec = session("s1")
    first, created = store.log_session(rec)
    assert created is True
    assert first.status == "pending"
    again, created_again = store.log_session(rec)
    assert created_again is False
    assert again.seq == first.seq
    assert again.messages[0].content == "hello"
    assert again.timestamp == T0
    assert len(store.list_sessions("u1")) == 1


def test_log_session_conflict_on_different_content(store: Store) -> None:
    store.log_session(session("s1", text="hello"))
    with pytest.raises(SessionConflict, match="s1"):
        store.log_session(session("s1", text="something else"))
    # the same id for another user or agent is a different session
    _, created = store.log_session(session("s1", user_id="u2", text="something else"))
    assert created
    _, created = store.log_session(session("s1", agent_id="bot", text="something else"))
    assert created


def test_get_session_scoped(store: Store) -> None:
    store.log_session(session("s1", agent_id="bot"))
    assert store.get_session("u1", "s1") is None  # no-agent scope differs
    got = store.get_session("u1", "s1", "bot")
    assert got is not None and got.agent_id == "bot"
    assert store.get_session("u2", "s1", "bot") is None


def test_list_sessions_order_and_filters(store: Store) -> None:
    for sid, uid in [("b", "u1"), ("a", "u2"), ("c", "u1")]:
        store.log_session(session(sid, user_id=uid))
    assert [r.session_id for r in store.list_sessions()] == ["b", "a", "c"]
    assert [r.session_id for r in store.list_sessions("u1")] == ["b", "c"]
    seqs = [r.seq for r in store.list_sessions()]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    ingest(store, session("b", user_id="u1"))
    assert [r.session_id for r in store.list_sessions(status="pending")] == ["a", "c"]
    assert [r.session_id for r in store.list_sessions("u1", status="applied")] == ["b"]
    assert store.list_sessions("nobody") == []


def test_deferred_sessions_stay_out_of_the_queue_until_requeued(store: Store) -> None:
    """infer=False: logged (status "deferred"), not pending, until requeued."""
    stored, created = store.log_session(session("d1").model_copy(update={"status": "deferred"}), [])
    assert created and stored.status == "deferred"
    store.log_session(session("p1"))
    got = store.get_session("u1", "d1")
    assert got is not None and got.status == "deferred"
    assert [r.session_id for r in store.list_sessions(status="pending")] == ["p1"]
    assert [r.session_id for r in store.list_sessions(status="deferred")] == ["d1"]
    assert [r.session_id for r in store.list_sessions("u1")] == ["d1", "p1"]
    # logging it again (with inference) finds it as it is
    again, created = store.log_session(session("d1"))
    assert not created and again.status == "deferred"
    assert store.requeue_session("u1", "d1") is True
    assert [r.session_id for r in store.list_sessions(status="pending")] == ["d1", "p1"]
    assert store.list_sessions(status="deferred") == []
    # applied directly (no requeue): applied, and a replay queues it as pending
    store.log_session(session("d2").model_copy(update={"status": "deferred"}))
    ingest(store, session("d2"), add_w("Alice likes tea."))
    rec = store.get_session("u1", "d2")
    assert rec is not None and rec.status == "applied"
    store.reset("u1", keep_log=True)
    assert store.list_sessions(status="deferred") == []


def test_mark_failed(store: Store) -> None:
    store.log_session(session("s1"))
    store.mark_failed("u1", "s1", None, "model timed out")
    rec = store.get_session("u1", "s1")
    assert rec is not None
    assert rec.status == "failed"
    assert rec.error == "model timed out"
    assert rec.attempts == 1
    assert [r.session_id for r in store.list_sessions(status="failed")] == ["s1"]
    # a failed session can still be applied later, which clears the error
    ingest(store, session("s1"), add_w("Alice likes tea."))
    rec = store.get_session("u1", "s1")
    assert rec is not None and rec.status == "applied" and rec.error is None


def test_mark_failed_never_demotes_an_applied_session(store: Store) -> None:
    ingest(store, session("s1"), add_w("Alice likes tea."))
    store.mark_failed("u1", "s1", None, "late failure")
    rec = store.get_session("u1", "s1")
    assert rec is not None and rec.status == "applied"


def test_requeue_puts_a_failed_session_back_with_fresh_tries(store: Store) -> None:
    store.log_session(session("s1"))
    store.mark_failed("u1", "s1", None, "model timed out")
    store.mark_failed("u1", "s1", None, "model timed out again")
    assert store.requeue_session("u1", "s1") is True
    rec = store.get_session("u1", "s1")
    assert rec is not None
    assert (rec.status, rec.attempts, rec.error) == ("pending", 0, "model timed out again")
    assert [r.session_id for r in store.list_sessions(status="pending")] == ["s1"]
    # pending, applied and unknown sessions are left as they are
    assert store.requeue_session("u1", "s1") is False
    ingest(store, session("s1"), add_w("Alice likes tea."))
    assert store.requeue_session("u1", "s1") is False
    assert store.get_session("u1", "s1").status == "applied"  # type: ignore[union-attr]
    assert store.requeue_session("u1", "nope") is False


# --- user leases ------------------------------------------------------------------------
def test_a_live_lease_keeps_other_workers_out(store: Store) -> None:
    assert store.acquire_lease("u1", "w1", ttl=30) is True
    assert store.acquire_lease("u1", "w2", ttl=30) is False
    assert store.acquire_lease("u1", "w1", ttl=30) is True  # re-entrant for its holder
    assert store.acquire_lease("u2", "w2", ttl=30) is True  # leases are per user
    assert store.renew_lease("u1", "w2", ttl=30) is False
    assert store.renew_lease("u1", "w1", ttl=30) is True


def test_a_released_lease_is_free_and_only_its_holder_releases_it(store: Store) -> None:
    assert store.acquire_lease("u1", "w1", ttl=30)
    store.release_lease("u1", "w2")  # not w2's to give up
    assert store.acquire_lease("u1", "w2", ttl=30) is False
    store.release_lease("u1", "w1")
    assert store.acquire_lease("u1", "w2", ttl=30) is True


def test_an_expired_lease_can_be_taken_over_and_its_holder_knows(store: Store) -> None:
    import time

    assert store.acquire_lease("u1", "w1", ttl=0.2)
    time.sleep(0.4)  # w1 stopped renewing (crashed)
    assert store.acquire_lease("u1", "w2", ttl=30) is True
    assert store.renew_lease("u1", "w1", ttl=30) is False  # w1 learns it lost the lease
    store.release_lease("u1", "w1")
    assert store.acquire_lease("u1", "w3", ttl=30) is False  # w2 still holds it


# --- apply_session --------------------------------------------------------------------
def test_apply_session_adds(store: Store) -> None:
    ops = ingest(
        store,
        session("s1"),
        add_w("Alice adopted a beagle.", memory_type="event", keywords=["beagle"], turns=[0, 2]),
    )
    assert [o.op for o in ops] == ["add"]
    mem = store.get(ops[0].memory_id or "")
    assert mem is not None
    assert mem.content == "Alice adopted a beagle."
    assert mem.user_id == "u1" and mem.agent_id is None
    assert mem.timestamp == T0  # event time = session time
    assert mem.memory_type == "event"
    assert mem.keywords == ["beagle"]
    assert mem.turns == [0, 2]
    assert mem.session_id == "s1"
    assert mem.version == 1
    rec = store.get_session("u1", "s1")
    assert rec is not None and rec.status == "applied"


def test_an_add_may_name_its_memory(store: Store) -> None:
    [op] = ingest(store, session("s1"), add_w("Alice likes tea.", memory_id="named-1"))
    assert op.memory_id == "named-1"
    mem = store.get("named-1")
    assert mem is not None and mem.content == "Alice likes tea."
    # a live id cannot be taken twice, and the refused session changes nothing
    rec, _ = store.log_session(session("s2"))
    with pytest.raises(StoreError):
        store.apply_session(rec, [add_w("Alice likes coffee.", memory_id="named-1")], [])
    assert [m.content for m in store.list_memories("u1")] == ["Alice likes tea."]
    # once deleted, the name can be given again: its history goes on
    assert store.delete("named-1")
    ingest(store, session("s3"), add_w("Alice likes coffee.", memory_id="named-1"))
    assert [h.op for h in store.history("named-1")] == ["add", "delete", "add"]


def test_apply_session_update_keeps_history(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice works at Brightloop.", memory_type="persona"))
    mid = a.memory_id or ""
    later = T0 + timedelta(days=30)
    [u] = ingest(
        store, session("s2", timestamp=later), upd_w(mid, "Alice works at Brightloop as a lead.")
    )
    assert u.op == "update"
    assert u.memory_id == mid
    assert u.old_content == "Alice works at Brightloop."
    assert u.content == "Alice works at Brightloop as a lead."
    assert u.memory_type == "persona"  # kept from the old memory when the update names none
    mem = store.get(mid)
    assert mem is not None
    assert mem.content == "Alice works at Brightloop as a lead."
    assert mem.version == 2
    assert mem.timestamp == later
    assert mem.session_id == "s2"
    assert mem.memory_type == "persona"
    hist = store.history(mid)
    assert [(h.op, h.old_content, h.new_content, h.session_id, h.actor) for h in hist] == [
        ("add", None, "Alice works at Brightloop.", "s1", "manager"),
        (
            "update",
            "Alice works at Brightloop.",
            "Alice works at Brightloop as a lead.",
            "s2",
            "manager",
        ),
    ]
    assert store.count("u1") == 1


def test_noops_are_recorded_with_the_session(store: Store) -> None:
    rec, _ = store.log_session(session("s1"))
    noop = Operation(op="none", content="Alice likes tea.", note="add restates a known memory")
    ops = store.apply_session(rec, [add_w("Alice likes jazz.")], [noop])
    assert [o.op for o in ops] == ["add", "none"]
    recorded = store.session_operations("u1", "s1")
    assert [(o.op, o.content, o.note) for o in recorded] == [
        ("add", "Alice likes jazz.", None),
        ("none", "Alice likes tea.", "add restates a known memory"),
    ]
    assert recorded[0].memory_id == ops[0].memory_id
    assert store.session_operations("u1", "unknown") == []
    assert store.session_operations("u2", "s1") == []


def test_session_operations_empty_before_apply(store: Store) -> None:
    store.log_session(session("s1"))
    assert store.session_operations("u1", "s1") == []


def test_apply_twice_raises(store: Store) -> None:
    rec, _ = store.log_session(session("s1"))
    store.apply_session(rec, [add_w("Alice likes tea.")], [])
    with pytest.raises(StoreError):
        store.apply_session(rec, [add_w("Alice likes coffee.")], [])
    assert [m.content for m in store.list_memories("u1")] == ["Alice likes tea."]


def test_relogging_an_applied_session_reports_it_applied(store: Store) -> None:
    ingest(store, session("s1"), add_w("Alice likes tea."))
    again, created = store.log_session(session("s1"))
    assert not created
    assert again.status == "applied"


def test_apply_unlogged_session_raises(store: Store) -> None:
    with pytest.raises(StoreError):
        store.apply_session(session("ghost"), [add_w("Alice likes tea.")], [])
    assert store.count("u1") == 0


@pytest.mark.parametrize(
    "bad",
    [
        lambda: upd_w("no-such-id", "Alice moved to Paris."),
        lambda: add_w("Alice moved to Paris.", np.ones(7, dtype=np.float32)),
    ],
    ids=["update-unknown-id", "wrong-embedding-dim"],
)
def test_apply_is_all_or_nothing(store: Store, bad: Callable[[], PlannedWrite]) -> None:
    [first] = ingest(store, session("s0"), add_w("Alice works at Brightloop.", unit(0, 1)))
    rec, _ = store.log_session(session("s1", timestamp=T0 + timedelta(days=1)))
    writes = [
        add_w("Alice adopted a beagle.", unit(1, 0)),
        upd_w(first.memory_id or "", "Alice works at Brightloop as a lead.", unit(0, 1)),
        bad(),
    ]
    with pytest.raises(StoreError):
        store.apply_session(rec, writes, [Operation(op="none", content="x")])
    # nothing of s1 was written: not the add, not the update, no history, no index entries
    assert [m.content for m in store.list_memories("u1")] == ["Alice works at Brightloop."]
    mem = store.get(first.memory_id or "")
    assert mem is not None and mem.version == 1
    assert [h.op for h in store.history(first.memory_id or "")] == ["add"]
    assert store.session_memories("s1") == []
    assert [i for i, _ in store.dense_search("u1", unit(1, 0), 5)] == [first.memory_id]
    assert store.keyword_search("u1", ["beagle"], 5) == []
    assert store.keyword_search("u1", ["lead"], 5) == []
    got = store.get_session("u1", "s1")
    assert got is not None and got.status == "pending"
    assert store.session_operations("u1", "s1") == []
    # and the session can still be applied afterwards
    store.apply_session(rec, writes[:2], [])
    assert store.count("u1") == 2


def test_update_cannot_touch_another_users_memory(store: Store) -> None:
    [a] = ingest(store, session("s1", user_id="u2"), add_w("Bob likes tea."))
    rec, _ = store.log_session(session("s1"))
    with pytest.raises(StoreError):
        store.apply_session(rec, [upd_w(a.memory_id or "", "Bob hates tea.")], [])
    mem = store.get(a.memory_id or "")
    assert mem is not None and mem.content == "Bob likes tea."


# --- delete / reset -------------------------------------------------------------------
def test_delete_logs_history_with_actor(store: Store) -> None:
    ids = seed(store)
    assert store.delete(ids["dog"], actor="admin") is True
    assert store.get(ids["dog"]) is None
    assert store.count("u1") == 2
    hist = store.history(ids["dog"])
    assert [h.op for h in hist] == ["add", "delete"]
    assert hist[-1].actor == "admin"
    assert hist[-1].old_content == "Alice adopted a beagle named Rufus."
    assert hist[-1].new_content is None
    # gone from both indexes and from its session's memories
    assert ids["dog"] not in [i for i, _ in store.dense_search("u1", unit(1, 0), 5)]
    assert store.keyword_search("u1", ["beagle"], 5) == []
    assert [m.id for m in store.session_memories("s1")] == [ids["tea"]]
    assert store.delete(ids["dog"]) is False
    assert store.delete("never-existed") is False


def test_delete_default_actor_is_api(store: Store) -> None:
    ids = seed(store)
    store.delete(ids["tea"])
    assert store.history(ids["tea"])[-1].actor == "api"


# --- short memory ids ---------------------------------------------------------------
def test_resolve_memory_id_takes_a_unique_prefix(store: Store) -> None:
    named = ["ab1", "ab12", "ab2", "a%c", "a_c", "Ab9", "b\U0010ffffz"]
    ingest(store, session("s1"), *(add_w(f"fact {n}", memory_id=n) for n in named))
    ingest(store, session("s2", user_id="u2"), add_w("u2's fact", memory_id="ab3"))
    assert store.resolve_memory_id("ab2") == "ab2"
    assert store.resolve_memory_id("ab1") == "ab1"  # an exact id wins over ab12
    assert store.resolve_memory_id("ab12") == "ab12"
    assert store.resolve_memory_id("A") == "Ab9"  # case counts
    assert store.resolve_memory_id("a%") == "a%c"  # no wildcards
    assert store.resolve_memory_id("a_") == "a_c"
    assert store.resolve_memory_id("b\U0010ffff") == "b\U0010ffffz"
    with pytest.raises(AmbiguousMemoryId) as amb:
        store.resolve_memory_id("ab")
    assert amb.value.candidates == ["ab1", "ab12", "ab2", "ab3"]
    assert "'ab'" in str(amb.value) and "ab12" in str(amb.value)
    assert store.resolve_memory_id("ab", user_id="u2") == "ab3"  # narrowed to a user
    assert store.memory_ids_with_prefix("ab", "u1", limit=2) == ["ab1", "ab12"]
    with pytest.raises(UnknownMemory, match="'zz'"):
        store.resolve_memory_id("zz")
    with pytest.raises(UnknownMemory):
        store.resolve_memory_id("ab3", user_id="u1")
    # a deleted memory keeps its history, which its id still reaches
    assert store.delete("ab2")
    assert store.resolve_memory_id("ab2") == "ab2"
    with pytest.raises(AmbiguousMemoryId):
        store.resolve_memory_id("ab")  # the deleted one is still a candidate
    with pytest.raises(UnknownMemory):
        store.resolve_memory_id("ab2", deleted=False)  # ...unless they are left out
    assert store.memory_ids_with_prefix("ab", deleted=False) == ["ab1", "ab12", "ab3"]


def test_resolve_memory_id_lists_at_most_ten_candidates(store: Store) -> None:
    ingest(store, session("s1"), *(add_w(f"fact {i}", memory_id=f"m{i:02d}") for i in range(12)))
    with pytest.raises(AmbiguousMemoryId) as amb:
        store.resolve_memory_id("m")
    assert amb.value.candidates == [f"m{i:02d}" for i in range(10)]
    assert str(amb.value).endswith("m09, ...; give more characters")


def test_prefix_end_bounds_exactly_the_ids_that_start_with_a_prefix() -> None:
    assert prefix_end("ab") == "ac"
    assert prefix_end("a\ud7ff") == "a\ue000"  # over the surrogates, which are not text
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\U0010ffff") is None
    for p in ("ab", "a\ud7ff", "a\U0010ffff"):
        end = prefix_end(p)
        assert end is not None and p + "\U0010ffff" * 3 < end and p < end


def test_reset_removes_user_and_log(store: Store) -> None:
    ids = seed(store)
    assert store.reset("u1") == 3
    assert store.count("u1") == 0
    assert store.list_memories("u1") == []
    assert store.list_sessions("u1") == []
    assert store.history(ids["dog"]) == []
    assert store.dense_search("u1", unit(1, 0), 5) == []
    assert store.keyword_search("u1", ["Alice"], 5) == []
    # the other user is untouched
    assert store.count("u2") == 1
    assert [i for i, _ in store.dense_search("u2", unit(1, 0), 5)] == [ids["bob"]]
    assert len(store.list_sessions("u2")) == 1


def test_reset_keep_log_makes_sessions_pending_again(store: Store) -> None:
    seed(store)
    store.reset("u1", keep_log=True)
    assert store.count("u1") == 0
    sessions = store.list_sessions("u1")
    assert [(r.session_id, r.status) for r in sessions] == [("s1", "pending"), ("s2", "pending")]
    assert store.session_operations("u1", "s1") == []
    # they can be applied again (replay)
    ingest(store, session("s1"), add_w("Alice likes tea."))
    assert store.count("u1") == 1


def test_reset_one_agent(store: Store) -> None:
    ids = seed(store)
    assert store.reset("u1", agent_id="bot") == 1
    assert [m.id for m in store.list_memories("u1")] == [ids["dog"], ids["tea"]]
    assert [r.session_id for r in store.list_sessions("u1")] == ["s1"]
    assert store.history(ids["sister"]) == []
    assert len(store.history(ids["dog"])) == 1


# --- reads ----------------------------------------------------------------------------
def test_get_and_get_many_order(store: Store) -> None:
    ids = seed(store)
    assert store.get("missing") is None
    order = [ids["sister"], "missing", ids["dog"], ids["tea"]]
    assert [m.id for m in store.get_many(order)] == [ids["sister"], ids["dog"], ids["tea"]]
    assert store.get_many([]) == []
    got = store.get(ids["bob"])
    assert isinstance(got, MemoryItem) and got.user_id == "u2"


def test_list_memories_oldest_first_and_filters(store: Store) -> None:
    ids = seed(store)
    assert [m.id for m in store.list_memories("u1")] == [ids["dog"], ids["tea"], ids["sister"]]
    assert [m.id for m in store.list_memories("u1", limit=1)] == [ids["dog"]]
    day5 = T0 + timedelta(days=5)
    assert [m.id for m in store.list_memories("u1", filters=SearchFilters(since=day5))] == [
        ids["sister"]
    ]
    assert [m.id for m in store.list_memories("u1", filters=SearchFilters(until=day5))] == [
        ids["dog"],
        ids["tea"],
    ]
    # bounds are inclusive
    assert len(store.list_memories("u1", filters=SearchFilters(since=T0, until=T0))) == 2
    assert [
        m.id for m in store.list_memories("u1", filters=SearchFilters(memory_type="persona"))
    ] == [ids["tea"]]
    assert [m.id for m in store.list_memories("u1", filters=SearchFilters(session_id="s2"))] == [
        ids["sister"]
    ]
    # agent scoping: None = any agent; a name = that agent only
    assert [m.id for m in store.list_memories("u1", agent_id="bot")] == [ids["sister"]]
    assert store.list_memories("u1", agent_id="other") == []
    assert [m.id for m in store.list_memories("u2")] == [ids["bob"]]
    assert store.count("u1") == 3 and store.count("u1", "bot") == 1 and store.count("zz") == 0


def test_times_with_offsets_order_and_filter_by_instant(store: Store) -> None:
    plus5 = timezone(timedelta(hours=5))
    # 01:00 at +05:00 is 20:00 UTC the day before: earlier than 22:00 UTC
    early = datetime(2023, 5, 20, 1, 0, tzinfo=plus5)
    late = datetime(2023, 5, 19, 22, 0, tzinfo=UTC)
    [b] = ingest(store, session("late", timestamp=late), add_w("Alice flew home."))
    [a] = ingest(store, session("early", timestamp=early), add_w("Alice packed her bags."))
    assert [m.id for m in store.list_memories("u1")] == [a.memory_id, b.memory_id]
    mem = store.get(a.memory_id or "")
    assert mem is not None and mem.timestamp == early
    f = SearchFilters(since=datetime(2023, 5, 19, 21, 0, tzinfo=UTC))
    assert [m.id for m in store.list_memories("u1", filters=f)] == [b.memory_id]
    assert [i for i, _ in store.dense_search("u1", unit(1.0), 5, filters=f)] == [b.memory_id]


def test_filters_given_as_strings(store: Store) -> None:
    ids = seed(store)
    f = SearchFilters(since="2029-02-20")  # type: ignore[arg-type]
    assert [m.id for m in store.list_memories("u1", filters=f)] == [ids["sister"]]


def test_session_memories_returns_what_the_session_wrote(store: Store) -> None:
    [a, b] = ingest(store, session("s1"), add_w("Alice lives in Rome."), add_w("Alice likes tea."))
    ingest(
        store,
        session("s2", timestamp=T0 + timedelta(days=3)),
        upd_w(a.memory_id or "", "Alice lives in Milan."),
        add_w("Alice has a cat."),
    )
    s1 = {m.id: m.content for m in store.session_memories("s1")}
    assert s1 == {a.memory_id: "Alice lives in Rome.", b.memory_id: "Alice likes tea."}
    s2 = sorted(m.content for m in store.session_memories("s2"))
    assert s2 == ["Alice has a cat.", "Alice lives in Milan."]
    assert store.session_memories("s1", user_id="u2") == []
    assert len(store.session_memories("s1", user_id="u1")) == 2
    assert store.session_memories("nope") == []
    # the live memory itself holds the newest content
    live = store.get(a.memory_id or "")
    assert live is not None and live.content == "Alice lives in Milan."


# --- dense search ---------------------------------------------------------------------
def test_dense_search_exact_nearest_neighbours(store: Store) -> None:
    vecs = {
        "east": unit(1, 0),
        "north": unit(0, 1),
        "north-east": unit(1, 1),
        "up": unit(0, 0, 1),
    }
    ops = ingest(store, session("s1"), *[add_w(name, v) for name, v in vecs.items()])
    by_name = {o.content: o.memory_id for o in ops}
    q = unit(1, 0.2)
    hits = store.dense_search("u1", q, 4)
    assert [h for h, _ in hits] == [
        by_name["east"],
        by_name["north-east"],
        by_name["north"],
        by_name["up"],
    ]
    sims = [s for _, s in hits]
    expected = [float(q @ vecs[n]) for n in ("east", "north-east", "north", "up")]
    assert sims == pytest.approx(expected, abs=1e-4)
    assert [h for h, _ in store.dense_search("u1", q, 2)] == [
        by_name["east"],
        by_name["north-east"],
    ]


def test_dense_search_user_partition_and_filters(store: Store) -> None:
    ids = seed(store)
    assert [i for i, _ in store.dense_search("u2", unit(1, 0), 10)] == [ids["bob"]]
    assert ids["bob"] not in [i for i, _ in store.dense_search("u1", unit(1, 0), 10)]
    assert store.dense_search("nobody", unit(1, 0), 10) == []
    f = SearchFilters(memory_type="persona")
    assert [i for i, _ in store.dense_search("u1", unit(1, 0), 10, filters=f)] == [ids["tea"]]
    f = SearchFilters(session_id="s2")
    assert [i for i, _ in store.dense_search("u1", unit(1, 0), 10, filters=f)] == [ids["sister"]]
    f = SearchFilters(since=T0 + timedelta(days=1))
    assert [i for i, _ in store.dense_search("u1", unit(1, 0), 10, filters=f)] == [ids["sister"]]
    f = SearchFilters(until=T0)
    assert {i for i, _ in store.dense_search("u1", unit(1, 0), 10, filters=f)} == {
        ids["dog"],
        ids["tea"],
    }
    assert [i for i, _ in store.dense_search("u1", unit(1, 0), 10, agent_id="bot")] == [
        ids["sister"]
    ]


def test_dense_search_sees_updates(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice lives in Rome.", unit(1, 0)))
    ingest(store, session("s2"), upd_w(a.memory_id or "", "Alice lives in Oslo.", unit(0, 1)))
    [(hit, sim)] = store.dense_search("u1", unit(0, 1), 5)
    assert hit == a.memory_id and sim == pytest.approx(1.0, abs=1e-4)


# --- keyword search -------------------------------------------------------------------
def test_keyword_search_terms(store: Store) -> None:
    ids = seed(store)
    assert [i for i, _ in store.keyword_search("u1", ["beagle"], 5)] == [ids["dog"]]
    got = {i for i, _ in store.keyword_search("u1", ["oslo", "tea"], 5)}
    assert got == {ids["sister"], ids["tea"]}  # any term may match
    assert store.keyword_search("u1", ["zebra"], 5) == []
    assert store.keyword_search("u1", [], 5) == []
    # a memory matching more terms ranks first
    ranked = store.keyword_search("u1", ["alice", "beagle", "rufus"], 5)
    assert ranked[0][0] == ids["dog"]
    assert ranked[0][1] >= ranked[-1][1]
    assert len(store.keyword_search("u1", ["alice"], 2)) == 2


def test_keyword_search_finds_keywords_field(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice got a new job.", keywords=["Brightloop"]))
    assert [i for i, _ in store.keyword_search("u1", ["brightloop"], 5)] == [a.memory_id]


def test_keyword_search_sees_updates(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice lives in Rome."))
    ingest(store, session("s2"), upd_w(a.memory_id or "", "Alice lives in Oslo."))
    assert store.keyword_search("u1", ["rome"], 5) == []
    assert [i for i, _ in store.keyword_search("u1", ["oslo"], 5)] == [a.memory_id]


def test_keyword_search_user_isolation_and_filters(store: Store) -> None:
    ids = seed(store)
    assert [i for i, _ in store.keyword_search("u2", ["beagle"], 5)] == [ids["bob"]]
    assert [i for i, _ in store.keyword_search("u1", ["bob"], 5)] == []
    terms = ["alice"]
    f = SearchFilters(memory_type="relationship")
    assert [i for i, _ in store.keyword_search("u1", terms, 5, filters=f)] == [ids["sister"]]
    f = SearchFilters(session_id="s1")
    assert {i for i, _ in store.keyword_search("u1", terms, 5, filters=f)} == {
        ids["dog"],
        ids["tea"],
    }
    f = SearchFilters(since=T0 + timedelta(days=1))
    assert [i for i, _ in store.keyword_search("u1", terms, 5, filters=f)] == [ids["sister"]]
    f = SearchFilters(until=T0 + timedelta(days=1))
    assert ids["sister"] not in [i for i, _ in store.keyword_search("u1", terms, 5, filters=f)]
    assert [i for i, _ in store.keyword_search("u1", terms, 5, agent_id="bot")] == [ids["sister"]]


@pytest.mark.parametrize(
    "term",
    [
        '"',
        '"tea"',
        "*",
        "tea*",
        "(",
        ")",
        "tea)",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "-tea",
        "a:b",
        "^tea",
        "'",
        "{",
        "}",
        "",
        "  ",
        "'; DROP TABLE memories; --",
        "tea NEAR/2 Alice",
    ],
)
def test_keyword_search_query_syntax_is_inert(store: Store, term: str) -> None:
    ids = seed(store)
    hits = store.keyword_search("u1", [term, "beagle"], 5)  # must not raise
    assert ids["dog"] in [i for i, _ in hits]  # and the plain term still matches
    assert store.count("u1") == 3


def test_keyword_search_special_characters_in_content(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w('Alice said "café (au lait)*" is her favourite.'))
    assert [i for i, _ in store.keyword_search("u1", ["café"], 5)] == [a.memory_id]
    assert [i for i, _ in store.keyword_search("u1", ["lait)*"], 5)] == [a.memory_id]


# --- call log -------------------------------------------------------------------------
def test_session_calls_are_read_back_per_session_and_forgotten_with_the_user(
    store: Store,
) -> None:
    store.log_session(session("s1"))
    store.log_session(session("s1", agent_id="bot"))
    tagged = {"user_id": "u1", "session_id": "s1"}
    store.log_call(CallRecord("manager", "m", 10, 5, 4, 0.1, True, reply="{}", **tagged))
    store.log_call(CallRecord("manager", "m", 0, 0, 0, 0.2, False, "timed out", **tagged))
    store.log_call(CallRecord("manager", "m", 1, 1, 0, 0.3, True, agent_id="bot", **tagged))
    store.log_call(CallRecord("answer", "m", 1, 1, 0, 0.0, True))  # outside any session
    calls = store.session_calls("u1", "s1")
    assert [(c.ok, c.cached_tokens, c.reply, c.error) for c in calls] == [
        (True, 4, "{}", None),
        (False, 0, None, "timed out"),
    ]
    assert calls[0].at.tzinfo is not None and calls[0].session_id == "s1"
    [bot] = store.session_calls("u1", "s1", "bot")
    assert bot.agent_id == "bot" and bot.seconds == pytest.approx(0.3)
    assert store.session_calls("u2", "s1") == []
    store.reset("u1", keep_log=True)  # a replay keeps what the sessions cost
    assert len(store.session_calls("u1", "s1")) == 2
    store.reset("u1")  # forgetting the user forgets the replies that quote them
    assert store.session_calls("u1", "s1") == [] and store.session_calls("u1", "s1", "bot") == []


def test_edit_records_a_version_by_a_person(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice likes tea.", turns=[0], memory_type="persona"))
    mid = a.memory_id or ""
    before = store.get(mid)
    op = store.edit(mid, "Alice likes green tea.", unit(0, 1), ["green", "tea"], actor="person")
    assert op is not None and op.op == "update" and op.old_content == "Alice likes tea."
    after = store.get(mid)
    assert after is not None and before is not None
    assert after.content == "Alice likes green tea." and after.version == 2
    # where it came from and when it happened stay; only the text is corrected
    assert (after.session_id, after.turns, after.timestamp) == ("s1", [0], before.timestamp)
    assert after.memory_type == "persona" and after.keywords == ["green", "tea"]
    [_, edit] = store.history(mid)
    assert (edit.op, edit.actor, edit.session_id) == ("update", "person", None)
    assert (edit.old_content, edit.new_content, edit.user_id) == (
        "Alice likes tea.",
        "Alice likes green tea.",
        "u1",
    )
    # the indexes follow the new text
    assert [i for i, _ in store.keyword_search("u1", ["green"], 5)] == [mid]
    assert [i for i, _ in store.dense_search("u1", unit(0, 1), 1)] == [mid]
    assert store.edit("no-such-id", "x", unit(1), []) is None


def test_list_users_by_prefix(store: Store) -> None:
    ingest(store, session("s1", user_id="a:martin"), add_w("Martin likes tea."))
    store.log_session(session("s1", user_id="a:zoe"))
    store.log_session(session("s1", user_id="a_b:x"))
    store.log_session(session("s1", user_id="b:martin"))
    assert store.list_users("a:") == ["a:martin", "a:zoe"]
    assert store.list_users("a_") == ["a_b:x"]  # no LIKE wildcard
    assert store.list_users() == ["a:martin", "a:zoe", "a_b:x", "b:martin"]
    assert store.list_users("c:") == []


def test_log_call_between_log_and_apply(store: Store) -> None:
    """The Store interface has no reader for the call log (backends test its rows);
    here: logging calls, failed ones included, never disturbs a session in flight."""
    rec, _ = store.log_session(session("s1"))
    store.log_call(CallRecord("manager", "scripted", 10, 5, 2, 0.1, True))
    store.log_call(CallRecord("manager", "scripted", 0, 0, 0, 0.2, False, "timeout ⏱ ' \" ;"))
    got = store.get_session("u1", "s1")
    assert got is not None and got.status == "pending"
    store.apply_session(rec, [add_w("Alice likes tea.")], [])
    store.log_call(CallRecord("answer", "scripted", 1, 1, 0, 0.0, True))
    assert [m.content for m in store.list_memories("u1")] == ["Alice likes tea."]


def test_sqlite_call_log_keeps_replies_and_upgrades_an_older_store(tmp_path: Path) -> None:
    """Migration 003 adds the raw reply to a store made before it: earlier rows stay,
    with no reply; rows logged after it carry theirs."""
    import sqlite3

    from deltamem.store.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    SQLiteStore(path, dim=4, embedder_name="test").close()
    with sqlite3.connect(path) as con:  # make it the store as migration 002 left it
        undo_sqlite_migration_004(con)
        con.execute("ALTER TABLE llm_calls DROP COLUMN reply")
        con.execute(
            "INSERT INTO llm_calls (at, model, purpose, prompt_tokens, completion_tokens,"
            " cached_tokens, seconds, ok) VALUES ('2026-01-01', 'm', 'old', 1, 1, 0, 0, 1)"
        )
        con.execute("PRAGMA user_version=2")
    store = SQLiteStore(path, dim=4, embedder_name="test")
    store.log_call(CallRecord("manager", "m", 10, 5, 0, 0.1, True, reply='{"operations": []}'))
    store.log_call(CallRecord("manager", "m", 0, 0, 0, 0.2, False, "timed out"))
    store.close()
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT purpose, ok, error, reply FROM llm_calls ORDER BY id").fetchall()
        version = con.execute("PRAGMA user_version").fetchone()[0]
    assert version == max(n for n, _ in migration_scripts("deltamem.store.migrations"))
    assert rows == [
        ("old", 1, None, None),
        ("manager", 1, None, '{"operations": []}'),
        ("manager", 0, "timed out", None),
    ]


def test_timestamps_are_timezone_aware(store: Store) -> None:
    [a] = ingest(store, session("s1"), add_w("Alice likes tea."))
    mem = store.get(a.memory_id or "")
    assert mem is not None
    assert mem.timestamp.tzinfo is not None
    assert mem.created_at.tzinfo is not None
    assert mem.created_at <= datetime.now(UTC)
    h = store.history(a.memory_id or "")[0]
    assert h.at.tzinfo is not None


def test_keyword_search_with_terms_sharing_a_stem(store: Store) -> None:
    """'film' and 'films' stem alike; the query must still run and match."""
    from fakes import session as make_session
    from fakes import unit

    from deltamem.store.base import PlannedWrite

    rec, _ = store.log_session(make_session("s1", "u"))
    store.apply_session(rec, [PlannedWrite("add", "Ana loves old films.", unit(1.0))], [])
    hits = store.keyword_search("u", ["film", "films", "loves"], 5)
    assert [store.get(mid).content for mid, _ in hits] == ["Ana loves old films."]  # type: ignore[union-attr]


# --- outdated memories ------------------------------------------------------------------
def test_a_write_that_outdates_a_memory_stores_when_and_by_what(store: Store) -> None:
    [job] = ingest(store, session("s1", timestamp=T0), add_w("Alice works at Brightloop."))
    [other] = ingest(store, session("s0", user_id="u2", timestamp=T0), add_w("Bob works here."))
    later = session("s2", timestamp=T0 + timedelta(days=30))
    ops = ingest(
        store,
        later,
        add_w(
            "Alice left Brightloop.",
            unit(0, 1),
            memory_id="left-1",
            outdates=[job.memory_id or "", other.memory_id or ""],  # another user's: untouched
            outdates_rule="ENDED_BY_LATER",
        ),
    )
    assert [(o.op, o.memory_id, o.rule) for o in ops] == [
        ("add", "left-1", None),
        ("invalidate", job.memory_id, "ENDED_BY_LATER"),
    ]
    old = store.get(job.memory_id or "")
    assert old is not None and old.content == "Alice works at Brightloop."
    assert old.invalid_at == later.timestamp and old.superseded_by == "left-1"
    assert [h.op for h in store.history(old.id)] == ["add", "invalidate"]
    # out of the listing unless asked for; the other user's memory still holds
    assert [m.id for m in store.list_memories("u1")] == ["left-1"]
    assert {m.id for m in store.list_memories("u1", filters=SearchFilters(outdated=True))} == {
        "left-1",
        old.id,
    }
    mine = store.get(other.memory_id or "")
    assert mine is not None and mine.invalid_at is None
