"""The `Memory` facade end to end: scripted LLM, real embedder, real SQLite store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops, update

from deltamem.embed import Embedder
from deltamem.llm.base import CallRecord, LLMError, LLMTimeout
from deltamem.manager.agent import ManagerConfig
from deltamem.memory import MAX_SESSION_MESSAGES, InvalidSession, Memory, SessionFailed
from deltamem.store.base import PlannedWrite, SessionConflict
from deltamem.store.sqlite import SQLiteStore
from deltamem.types import Message, Operation, SessionRecord

HALU_TS = "Sep 04, 2025, 09:05:32"
HALU_DT = datetime(2025, 9, 4, 9, 5, 32, tzinfo=UTC)


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


DOG = [
    user("I adopted a beagle named Rufus last week."),
    bot("Congratulations! Beagles are great."),
]
JOB = [user("I started a new job as a UX designer at Brightloop."), bot("Nice, good luck!")]


def prompt(llm: ScriptedLLM, i: int) -> str:
    return llm.requests[i]["messages"][-1]["content"]


def nothing_stored(mem: Memory, llm: ScriptedLLM) -> None:
    assert mem.store.list_sessions() == []
    assert mem.get_all(user_id="alice") == []
    assert llm.requests == []


# --- basic API ------------------------------------------------------------------------
def test_add_search_get_history(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus in August 2025.", "event")))
    res = mem.add(DOG, user_id="alice", session_id="s1", timestamp=HALU_TS)
    assert res.status == "applied" and not res.already_applied
    [op] = res.applied
    assert op.op == "add" and op.memory_id
    assert res.cost["llm_calls"] == 1 and res.cost["prompt_tokens"] > 0

    [item] = mem.get_all(user_id="alice")
    assert item.id == op.memory_id
    assert item.content == "Alice adopted a beagle named Rufus in August 2025."
    assert item.timestamp == HALU_DT  # event time is the session's, not the wall clock
    assert item.session_id == "s1" and item.turns == [0]
    assert item.memory_type == "event"
    assert mem.get(item.id) == item

    hits = mem.search("What is the name of Alice's dog?", user_id="alice", tiers="facts")
    assert [h.memory.id for h in hits] == [item.id]
    assert hits[0].score > 0 and hits[0].kind == "fact"
    # the product's search also finds what was said, as episodes of the session log
    both = mem.search("What is the name of Alice's dog?", user_id="alice")
    assert item.id in [h.memory.id for h in both]
    assert {h.kind for h in both} == {"fact", "episode"}
    assert mem.search("   ", user_id="alice") == []
    assert [h.op for h in mem.history(item.id)] == ["add"]
    assert [m.id for m in mem.session_memories("s1")] == [item.id]
    assert [o.op for o in mem.session_operations("s1", user_id="alice")] == ["add"]
    assert "Thursday, 04 September 2025" in prompt(llm, 0)


def test_update_flow_and_history(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice works at Brightloop.")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    [first] = mem.get_all(user_id="alice")
    llm.push(ops(update("m1", "Alice works at Brightloop as a lead designer.")))
    res = mem.add(
        [user("I got promoted to lead designer at Brightloop!")],
        user_id="alice",
        session_id="s2",
        timestamp="2025-06-01",
    )
    [op] = res.applied
    assert (op.op, op.memory_id, op.old_content) == (
        "update",
        first.id,
        "Alice works at Brightloop.",
    )
    assert "m1 | 2025-01-01 | Alice works at Brightloop." in prompt(llm, 1)
    [item] = mem.get_all(user_id="alice")
    assert item.content == "Alice works at Brightloop as a lead designer."
    assert item.version == 2
    assert item.timestamp == datetime(2025, 6, 1, tzinfo=UTC)
    assert [(h.op, h.session_id) for h in mem.history(item.id)] == [
        ("add", "s1"),
        ("update", "s2"),
    ]
    # each session reports what it wrote
    assert [m.content for m in mem.session_memories("s1")] == ["Alice works at Brightloop."]
    assert [m.content for m in mem.session_memories("s2")] == [
        "Alice works at Brightloop as a lead designer."
    ]


def test_event_time_falls_back_to_first_message_timestamp(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    msgs = [
        user("I adopted a beagle named Rufus.", timestamp="1:56 pm on 8 May, 2023"),
        bot("Nice"),
    ]
    mem.add(msgs, user_id="alice", session_id="s1")
    [item] = mem.get_all(user_id="alice")
    assert item.timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_event_time_without_any_timestamp_is_now(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    before = datetime.now(UTC)
    mem.add(DOG, user_id="alice", session_id="s1")
    [item] = mem.get_all(user_id="alice")
    assert before <= item.timestamp <= datetime.now(UTC)


def test_explicit_timestamp_wins_over_message_timestamps(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    msgs = [user("I adopted a beagle named Rufus.", timestamp="2023-05-08T10:00:00Z")]
    mem.add(msgs, user_id="alice", session_id="s1", timestamp="2023/05/20 (Sat) 02:21")
    [item] = mem.get_all(user_id="alice")
    assert item.timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)


def test_filters_as_dict(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice works at Brightloop.")), ops(add("Alice adopted a beagle.", "event")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    mem.add(DOG, user_id="alice", session_id="s2", timestamp="2025-06-01")
    got = mem.get_all(user_id="alice", filters={"since": "2025-03-01"})
    assert [m.content for m in got] == ["Alice adopted a beagle."]
    hits = mem.search("Alice", user_id="alice", filters={"memory_type": "persona"})
    assert [h.memory.content for h in hits] == ["Alice works at Brightloop."]
    assert [m.content for m in mem.get_all(user_id="alice", limit=1)] == [
        "Alice works at Brightloop."
    ]


# --- idempotency and conflicts -------------------------------------------------------------
def test_readding_a_session_is_idempotent(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    first = mem.add(DOG, user_id="alice", session_id="s1", timestamp=HALU_TS)
    again = mem.add(DOG, user_id="alice", session_id="s1", timestamp=HALU_TS)
    assert len(llm.requests) == 1  # no LLM call the second time
    assert again.already_applied and again.status == "applied"
    assert [o.memory_id for o in again.operations] == [o.memory_id for o in first.operations]
    assert len(mem.get_all(user_id="alice")) == 1


@pytest.mark.parametrize("session_id", ["s1", None], ids=["named", "unnamed"])
def test_readding_a_session_without_timestamps_is_idempotent(
    mem: Memory, llm: ScriptedLLM, session_id: str | None
) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    first = mem.add(DOG, user_id="alice", session_id=session_id)
    again = mem.add(DOG, user_id="alice", session_id=session_id)
    assert again.already_applied
    assert again.session_id == first.session_id
    assert len(llm.requests) == 1
    assert len(mem.get_all(user_id="alice")) == 1
    assert len(mem.store.list_sessions("alice")) == 1


def test_unnamed_sessions_get_content_ids(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle.")), ops(add("Alice works at Brightloop.")))
    a = mem.add(DOG, user_id="alice", timestamp=HALU_TS)
    b = mem.add(JOB, user_id="alice", timestamp=HALU_TS)
    assert a.session_id != b.session_id
    assert len(mem.get_all(user_id="alice")) == 2


def test_same_session_id_different_content_raises(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    mem.add(DOG, user_id="alice", session_id="s1", timestamp=HALU_TS)
    with pytest.raises(SessionConflict, match=r"'s1'.*different content"):
        mem.add(JOB, user_id="alice", session_id="s1", timestamp=HALU_TS)
    with pytest.raises(SessionConflict):
        mem.add(DOG, user_id="alice", session_id="s1", timestamp="2020-01-01")
    assert len(llm.requests) == 1
    assert [m.content for m in mem.get_all(user_id="alice")] == [
        "Alice adopted a beagle named Rufus."
    ]


# --- bad input -------------------------------------------------------------------------------
BAD_SESSIONS: list[tuple[str, Any, dict[str, Any], str]] = [
    ("string", "hello", {}, "must be a list"),
    ("bytes", b"hello", {}, "must be a list"),
    ("dict", {"role": "user", "content": "hi"}, {}, "must be a list"),
    ("none", None, {}, "must be a list"),
    ("int", 42, {}, "must be a list"),
    ("empty", [], {}, "no messages"),
    ("not-object", ["hello"], {}, "message 0 is a str"),
    ("missing-role", [{"content": "hi"}], {}, "message 0: role"),
    ("missing-content", [{"role": "user"}], {}, "message 0: content"),
    ("bad-role", [{"role": "robot", "content": "hi"}], {}, "message 0: role"),
    ("content-int", [{"role": "user", "content": 5}], {}, "message 0: content"),
    ("content-list", [user("ok"), {"role": "user", "content": ["a"]}], {}, "message 1: content"),
    ("blank", [user("ok"), user("   \n ")], {}, "message 1: content.*blank"),
    ("bad-utf8", [{"role": "user", "content": b"caf\xe9 \xff"}], {}, "message 0.*UTF-8"),
    ("lone-surrogate", [user("hi \udc80 there")], {}, "message 0.*surrogate"),
    ("msg-timestamp", [user("hi", timestamp="the day after tomorrow")], {}, "message 0: timestamp"),
    ("timestamp", [user("hi")], {"timestamp": "next Tuesday-ish"}, "next Tuesday-ish"),
    ("too-long", [user("x" * 20_001)], {}, "message 0: content"),
    ("too-many", [user("hi")] * (MAX_SESSION_MESSAGES + 1), {}, "2001 messages"),
    ("no-user-id", [user("hi")], {"user_id": "  "}, "user_id"),
    ("nul-in-user-id", [user("hi")], {"user_id": "a\x00b"}, "user_id contains a control"),
    ("slash-in-session-id", [user("hi")], {"session_id": "team/s1"}, "session_id contains '/'"),
    ("dot-dot-agent-id", [user("hi")], {"agent_id": ".."}, "agent_id cannot be '..'"),
    ("long-session-id", [user("hi")], {"session_id": "s" * 257}, "session_id is longer"),
    ("user-id-int", [user("hi")], {"user_id": 7}, "user_id must be a string"),
    ("timestamp-int", [user("hi")], {"timestamp": 1_700_000_000}, "1700000000"),
]


@pytest.mark.parametrize(
    ("messages", "kwargs", "pattern"),
    [b[1:] for b in BAD_SESSIONS],
    ids=[b[0] for b in BAD_SESSIONS],
)
def test_bad_input_raises_invalid_session_and_writes_nothing(
    mem: Memory, llm: ScriptedLLM, messages: Any, kwargs: dict[str, Any], pattern: str
) -> None:
    kwargs = {"user_id": "alice", "session_id": "s1", **kwargs}
    with pytest.raises(InvalidSession, match=pattern):
        mem.add(messages, **kwargs)
    nothing_stored(mem, llm)
    with pytest.raises(InvalidSession):
        mem.log_session(messages, **kwargs)
    nothing_stored(mem, llm)


def test_invalid_session_is_a_value_error() -> None:
    assert issubclass(InvalidSession, ValueError)


def test_utf8_bytes_content_is_decoded(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice loves café au lait.")))
    mem.add(
        [{"role": "user", "content": "I love caf\xe9 au lait".encode()}],
        user_id="alice",
        session_id="s1",
    )
    rec = mem.store.get_session("alice", "s1")
    assert rec is not None and rec.messages[0].content == "I love café au lait"
    assert "[0] user: I love café au lait" in prompt(llm, 0)


def test_message_objects_are_accepted(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    msgs = [Message(role="user", content="I adopted a beagle named Rufus.", timestamp=HALU_TS)]
    mem.add(msgs, user_id="alice", session_id="s1")
    [item] = mem.get_all(user_id="alice")
    assert item.timestamp == HALU_DT


def test_session_with_only_assistant_turns_is_applied_without_llm(
    mem: Memory, llm: ScriptedLLM
) -> None:
    res = mem.add([bot("Hello, how can I help?")], user_id="alice", session_id="s1")
    assert res.status == "applied" and res.operations == []
    assert llm.requests == []
    rec = mem.store.get_session("alice", "s1")
    assert rec is not None and rec.status == "applied"


# --- long sessions -----------------------------------------------------------------------------
def long_session(n: int = 10) -> list[dict[str, Any]]:
    """n user turns of ~1,000 tokens each (about 4 chunks with the default budget)."""
    return [user(f"Part {i}: " + " ".join(f"detail{i}x{j}" for j in range(400))) for i in range(n)]


FACTS = [
    "Alice adopted a beagle named Rufus.",
    "Alice works as a UX designer at Brightloop.",
    "Alice's sister Mia is a nurse in Oslo.",
    "Alice ran the Berlin marathon in 2024.",
    "Alice is allergic to peanuts.",
    "Alice plays the cello in a community orchestra.",
    "Alice is learning Japanese.",
    "Alice's favourite film is Spirited Away.",
    "Alice grew up on a farm in Kerala.",
    "Alice drives an old blue Volvo.",
]


def test_oversized_session_is_chunked_and_applied_in_one_transaction(
    mem: Memory, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = iter(FACTS)
    llm.default = lambda messages: ops(add(next(facts)))
    calls: list[int] = []
    real = mem.store.apply_session

    def counting(
        session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        calls.append(len(writes))
        return real(session, writes, noops)

    monkeypatch.setattr(mem.store, "apply_session", counting)
    res = mem.add(long_session(), user_id="alice", session_id="long", timestamp=HALU_TS)
    n = len(llm.requests)
    assert n >= 3
    # every chunk's prompt holds consecutive parts, in order, and each part appears once
    seen = [i for k in range(n) for i in range(10) if f"[{i}] user: Part {i}:" in prompt(llm, k)]
    assert seen == list(range(10))
    assert calls == [n]  # one apply_session with every chunk's facts
    assert len(res.applied) == n
    assert {m.session_id for m in mem.get_all(user_id="alice")} == {"long"}
    assert res.cost["chunks"] == n


def test_failure_in_a_later_chunk_applies_nothing(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice fact one.")), ops(add("Alice fact two.")))
    llm.default = "not json at all"
    with pytest.raises(SessionFailed):
        mem.add(long_session(), user_id="alice", session_id="long", timestamp=HALU_TS)
    assert len(llm.requests) == 4  # two chunks fine, then the third and its retry
    assert mem.get_all(user_id="alice") == []
    rec = mem.store.get_session("alice", "long")
    assert rec is not None and rec.status == "failed"


# --- LLM failures ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("garbage", "error"),
    [
        ("I think Alice has a dog.", "JSON"),
        ('[{"op": "add", "content": "Alice has a dog."}]', "JSON"),
        ({"operations": "DROP TABLE"}, "wrong shape (operations: Input should be a valid list"),
        ({}, "wrong shape (operations: Field required"),
        (LLMTimeout("model took longer than 5s"), "longer than 5s"),
    ],
    ids=["text", "json-list", "operations-string", "empty-object", "timeout"],
)
def test_llm_failure_marks_session_failed_then_retry_succeeds(
    mem: Memory, llm: ScriptedLLM, garbage: Any, error: str
) -> None:
    llm.push(garbage, garbage)
    with pytest.raises(SessionFailed, match="s1") as info:
        mem.add(DOG, user_id="alice", session_id="s1", timestamp=HALU_TS)
    assert error in str(info.value)
    # a bad reply is asked again once (retries=1), then given up; a timeout is not
    # asked again (a hung model would hold the session twice as long)
    assert len(llm.requests) == (1 if isinstance(garbage, LLMTimeout) else 2)
    llm.replies.clear()
    rec = mem.store.get_session("alice", "s1")
    assert rec is not None
    assert rec.status == "failed" and error in (rec.error or "")
    assert mem.get_all(user_id="alice") == []
    assert mem.session_memories("s1") == []
    assert mem.process_pending() == []  # failed sessions wait for an explicit retry

    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    res = mem.retry("s1", user_id="alice")
    assert res.status == "applied"
    assert [m.content for m in mem.get_all(user_id="alice")] == [
        "Alice adopted a beagle named Rufus."
    ]
    rec = mem.store.get_session("alice", "s1")
    assert rec is not None and rec.status == "applied" and rec.error is None


def test_retry_of_applied_session_is_a_noop(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    mem.add(DOG, user_id="alice", session_id="s1")
    res = mem.retry("s1", user_id="alice")
    assert res.already_applied and len(llm.requests) == 1
    with pytest.raises(KeyError):
        mem.retry("nope", user_id="alice")


def test_llm_recovers_within_retries(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push("garbage", ops(add("Alice adopted a beagle named Rufus.")))
    res = mem.add(DOG, user_id="alice", session_id="s1")
    assert res.status == "applied" and len(res.applied) == 1
    assert len(llm.requests) == 2


def test_failure_while_applying_leaves_nothing_half_applied(
    mem: Memory, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.push(ops(add("Alice works at Brightloop.")))
    mem.add(JOB, user_id="alice", session_id="s0", timestamp="2025-01-01")
    [job] = mem.get_all(user_id="alice")

    store: Any = mem.store
    real_insert = store._insert
    inserted: list[str] = []

    def failing_insert(db: Any, session: SessionRecord, w: PlannedWrite, now: str) -> Operation:
        if inserted:
            raise RuntimeError("disk full")
        inserted.append(w.content)
        return real_insert(db, session, w, now)

    monkeypatch.setattr(store, "_insert", failing_insert)
    reply = ops(
        update("m1", "Alice works at Brightloop as a lead."),
        add("Alice adopted a beagle named Rufus."),
        add("Alice's sister Mia lives in Oslo."),
    )
    llm.push(reply)
    with pytest.raises(RuntimeError, match="disk full"):
        mem.add(
            [user("Promoted to lead at Brightloop, got a beagle Rufus; my sister Mia is in Oslo.")],
            user_id="alice",
            session_id="s1",
            timestamp="2025-02-01",
        )
    assert inserted  # some writes ran before the failure
    assert [m.content for m in mem.get_all(user_id="alice")] == ["Alice works at Brightloop."]
    assert mem.get(job.id).version == 1  # type: ignore[union-attr]
    assert [h.op for h in mem.history(job.id)] == ["add"]
    assert mem.session_memories("s1") == []
    assert mem.search("beagle Rufus", user_id="alice", tiers="facts")[0].memory.id == job.id
    rec = mem.store.get_session("alice", "s1")
    assert rec is not None and rec.status == "pending"

    monkeypatch.undo()
    llm.push(reply)
    [res] = mem.process_pending()
    assert res.status == "applied" and len(res.applied) == 3
    assert len(mem.get_all(user_id="alice")) == 3


# --- queue semantics -----------------------------------------------------------------------
def test_process_pending_resumes_in_log_order(mem: Memory, llm: ScriptedLLM) -> None:
    mem.log_session([user("First: I live in Rome.")], user_id="alice", session_id="a1")
    mem.log_session([user("Second: I play the cello.")], user_id="bob", session_id="b1")
    mem.log_session([user("Third: I moved to Milan.")], user_id="alice", session_id="a2")
    assert llm.requests == []
    llm.default = lambda messages: ops()
    results = mem.process_pending()
    assert [r.session_id for r in results] == ["a1", "b1", "a2"]
    order = [p for k in range(3) for p in ("First", "Second", "Third") if p in prompt(llm, k)]
    assert order == ["First", "Second", "Third"]
    assert mem.store.list_sessions(status="pending") == []
    assert mem.process_pending() == []


def test_process_pending_for_one_user(mem: Memory, llm: ScriptedLLM) -> None:
    mem.log_session([user("I live in Rome.")], user_id="alice", session_id="a1")
    mem.log_session([user("I play the cello.")], user_id="bob", session_id="b1")
    llm.default = lambda messages: ops()
    assert [r.session_id for r in mem.process_pending("bob")] == ["b1"]
    assert [r.session_id for r in mem.store.list_sessions(status="pending")] == ["a1"]


def test_earlier_pending_session_is_applied_first(mem: Memory, llm: ScriptedLLM) -> None:
    mem.log_session(
        [user("I live in Rome.")], user_id="alice", session_id="s1", timestamp="2025-01-01"
    )
    mem.log_session([user("I play the cello.")], user_id="bob", session_id="b1")
    llm.push(
        ops(add("Alice lives in Rome.")),
        ops(update("m1", "Alice lives in Milan.")),
    )
    res = mem.add(
        [user("I moved from Rome to Milan.")],
        user_id="alice",
        session_id="s2",
        timestamp="2025-03-01",
    )
    assert len(llm.requests) == 2
    assert "I live in Rome." in prompt(llm, 0)
    assert "m1 | 2025-01-01 | Alice lives in Rome." in prompt(llm, 1)
    assert res.session_id == "s2" and [o.op for o in res.applied] == ["update"]
    [item] = mem.get_all(user_id="alice")
    assert item.content == "Alice lives in Milan."
    # another user's pending session is not this add's business
    assert [r.session_id for r in mem.store.list_sessions(status="pending")] == ["b1"]


# --- scoping, delete, reset, replay -------------------------------------------------------
def test_users_never_see_each_other(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")), ops(add("Bob adopted a beagle.")))
    mem.add(DOG, user_id="alice", session_id="s1")
    mem.add([user("I adopted a beagle too.")], user_id="bob", session_id="s1")
    assert "Rufus" not in prompt(llm, 1)  # bob's manager is not shown alice's memories
    for uid, name in [("alice", "Alice"), ("bob", "Bob")]:
        hits = mem.search("beagle", user_id=uid)
        assert hits and all(h.memory.user_id == uid for h in hits)
        assert all(m.content.startswith(name) for m in mem.get_all(user_id=uid))
    assert mem.search("beagle", user_id="carol") == []
    assert [m.user_id for m in mem.session_memories("s1", user_id="bob")] == ["bob"]


def test_agent_scoping(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice likes tea.")), ops(add("Alice likes jazz.")))
    mem.add([user("I like tea.")], user_id="alice", session_id="s1", agent_id="barista")
    mem.add([user("I like jazz.")], user_id="alice", session_id="s1", agent_id="dj")
    assert len(mem.get_all(user_id="alice")) == 2
    assert [m.content for m in mem.get_all(user_id="alice", agent_id="dj")] == ["Alice likes jazz."]
    hits = mem.search("What does Alice like?", user_id="alice", agent_id="barista")
    assert {(h.kind, h.memory.content) for h in hits} == {
        ("fact", "Alice likes tea."),
        ("episode", "I like tea."),
    }


def test_delete(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus."), add("Alice works at Brightloop.")))
    mem.add(DOG + JOB, user_id="alice", session_id="s1")
    dog = mem.search("beagle", user_id="alice")[0].memory
    assert mem.delete(dog.id) is True
    assert mem.get(dog.id) is None
    assert dog.id not in [h.memory.id for h in mem.search("beagle Rufus", user_id="alice")]
    assert [(h.op, h.actor) for h in mem.history(dog.id)] == [("add", "manager"), ("delete", "api")]
    assert mem.delete(dog.id) is False
    assert [m.content for m in mem.session_memories("s1")] == ["Alice works at Brightloop."]


def test_reset_forgets_user_entirely(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice adopted a beagle named Rufus.")), ops(add("Bob plays the cello.")))
    mem.add(DOG, user_id="alice", session_id="s1")
    mem.add([user("I play the cello.")], user_id="bob", session_id="s1")
    assert mem.reset("alice") == 1
    assert mem.get_all(user_id="alice") == []
    assert mem.search("beagle", user_id="alice") == []
    assert mem.store.list_sessions("alice") == []
    assert len(mem.get_all(user_id="bob")) == 1
    # the session can be added afresh (the log was forgotten too)
    llm.push(ops(add("Alice adopted a beagle named Rufus.")))
    res = mem.add(DOG, user_id="alice", session_id="s1")
    assert not res.already_applied and len(llm.requests) == 3


def test_replay_rebuilds_from_the_log(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice lives in Rome.")), ops(update("m1", "Alice lives in Milan.")))
    mem.add([user("I live in Rome.")], user_id="alice", session_id="s1", timestamp="2025-01-01")
    mem.add([user("I moved to Milan.")], user_id="alice", session_id="s2", timestamp="2025-03-01")
    llm.push(ops(add("Bob adopted a beagle.")))
    mem.add(DOG, user_id="bob", session_id="b1", timestamp="2025-01-01")
    old_ids = {m.id for m in mem.get_all(user_id="alice")}
    llm.replies = [
        ops(add("Alice lived in Rome.")),
        ops(add("Alice moved to Milan in March 2025.")),
    ]
    before = len(llm.requests)
    results = mem.replay("alice")
    assert [r.session_id for r in results] == ["s1", "s2"]
    assert len(llm.requests) == before + 2
    items = mem.get_all(user_id="alice")
    assert [(m.content, m.session_id) for m in items] == [
        ("Alice lived in Rome.", "s1"),
        ("Alice moved to Milan in March 2025.", "s2"),
    ]
    assert not old_ids & {m.id for m in items}
    assert [m.timestamp for m in items] == [
        datetime(2025, 1, 1, tzinfo=UTC),
        datetime(2025, 3, 1, tzinfo=UTC),
    ]
    assert all(len(mem.history(m.id)) == 1 for m in items)
    assert len(mem.get_all(user_id="bob")) == 1


def test_memory_as_context_manager(make_memory: Callable[..., Memory], llm: ScriptedLLM) -> None:
    with make_memory(llm) as m:
        assert m.get_all(user_id="alice") == []


def test_llm_calls_are_counted_with_the_store(
    make_memory: Callable[..., Memory],
) -> None:
    llm = ScriptedLLM([{"search": ["dog"]}, ops(add("Alice adopted a beagle named Rufus."))])
    m = make_memory(llm, ManagerConfig(strategy="session", search_rounds=1))
    res = m.add(DOG, user_id="alice", session_id="s1")
    assert res.cost["llm_calls"] == 2 and res.cost["search_queries"] == 1
    assert llm.usage.by_purpose == {"manager": 2}


def test_every_llm_call_is_logged_to_the_store(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "calls.db", dim=embedder.dim)
    logged: list[CallRecord] = []
    monkeypatch.setattr(store, "log_call", logged.append)
    llm = ScriptedLLM([LLMError("refused"), ops(add("Alice adopted a beagle named Rufus."))])
    with Memory(llm=llm, embedder=embedder, store=store, config=SESSION) as m:
        m.add(DOG, user_id="alice", session_id="s1")
    assert [(r.purpose, r.ok, r.error) for r in logged] == [
        ("manager", False, "refused"),
        ("manager", True, None),
    ]
    assert logged[1].prompt_tokens > 0 and logged[1].completion_tokens > 0
    assert llm.usage.calls == 2


def test_call_logging_can_be_turned_off(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "calls.db", dim=embedder.dim)
    logged: list[CallRecord] = []
    monkeypatch.setattr(store, "log_call", logged.append)
    llm = ScriptedLLM([ops(add("Alice adopted a beagle named Rufus."))])
    with Memory(llm=llm, embedder=embedder, store=store, log_calls=False, config=SESSION) as m:
        m.add(DOG, user_id="alice", session_id="s1")
    assert logged == [] and llm.usage.calls == 1
