"""What the inspector reads through `Memory`: a fact's timeline with the turns behind
each version, a session's LLM calls, hand edits recorded as versions by a person."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import ScriptedLLM, add, ops, update

from deltamem.memory import Memory, SessionFailed
from deltamem.provenance import InvalidEdit
from deltamem.types import MAX_MEMORY_CHARS


def turns(*texts: str) -> list[dict[str, Any]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


def with_turns(op: dict[str, Any], *idx: int) -> dict[str, Any]:
    return {**op, "turns": list(idx)}


def test_timeline_names_the_session_and_turns_of_each_version(
    mem: Memory, llm: ScriptedLLM
) -> None:
    llm.push(ops(with_turns(add("Alice works at Brightloop."), 0)))
    mem.add(
        turns("I started at Brightloop.", "Congrats!"),
        user_id="alice",
        session_id="s1",
        agent_id="bot",
    )
    [fact] = mem.get_all(user_id="alice")
    llm.push(ops(with_turns(update("m1", "Alice leads design at Brightloop."), 2)))
    mem.add(
        turns("Hi again.", "Hello!", "I got promoted to lead designer."),
        user_id="alice",
        session_id="s2",
        agent_id="bot",
    )
    edited = mem.edit(fact.id, "  Alice leads design at Brightloop (since May).  ")
    assert edited is not None and edited.content == "Alice leads design at Brightloop (since May)."
    assert edited.version == 3 and edited.session_id == "s2"  # provenance kept
    assert mem.delete(fact.id, actor="person")
    steps = mem.timeline(fact.id)
    assert [(v.op, v.actor, v.session_id, v.agent_id) for v in steps] == [
        ("add", "manager", "s1", "bot"),
        ("update", "manager", "s2", "bot"),
        ("update", "person", None, None),
        ("delete", "person", None, None),
    ]
    # the turns each version came from, as the session's operations recorded them
    assert [v.turns for v in steps] == [[0], [2], [], []]
    assert steps[2].old_content == "Alice leads design at Brightloop."
    assert mem.timeline("unknown") == []


def test_edit_checks_the_text_and_an_unchanged_text_records_nothing(
    mem: Memory, llm: ScriptedLLM
) -> None:
    llm.push(ops(add("Alice likes tea.")))
    mem.add(turns("I like tea."), user_id="alice", session_id="s1")
    [fact] = mem.get_all(user_id="alice")
    for bad in ("", "   ", "x" * (MAX_MEMORY_CHARS + 1), "null\x00byte", "\ud800"):
        with pytest.raises(InvalidEdit):
            mem.edit(fact.id, bad)
    assert mem.edit(fact.id, "Alice likes tea.") is not None
    assert [h.op for h in mem.history(fact.id)] == ["add"]
    assert mem.edit("unknown", "Anything.") is None
    # the edited text is what search finds
    mem.edit(fact.id, "Alice drinks rooibos every morning.")
    hits = mem.search("rooibos", user_id="alice", tiers="facts")
    assert hits and hits[0].memory.id == fact.id


def test_session_calls_name_the_session_they_served_every_try(
    mem: Memory, llm: ScriptedLLM
) -> None:
    llm.push("not json", "still not json")
    with pytest.raises(SessionFailed):
        mem.add(turns("I like tea."), user_id="alice", session_id="s1")
    llm.push(ops(add("Alice likes tea.")))
    mem.retry("s1", user_id="alice")
    calls = mem.session_calls("s1", user_id="alice")
    assert [c.ok for c in calls] == [False, False, True]
    assert calls[0].reply == "not json" and "JSON" in (calls[0].error or "")
    assert all(c.purpose == "manager" and c.session_id == "s1" for c in calls)
    assert calls[-1].prompt_tokens > 0
    assert mem.session_calls("s1", user_id="bob") == []
    # a call outside a session (an answer) is logged without one
    llm.push("Tea.")
    mem.answer("What does Alice drink?", user_id="alice")
    assert len(mem.session_calls("s1", user_id="alice")) == 3


def test_users_and_sessions(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice likes tea.")))
    mem.add(turns("I like tea."), user_id="t:alice", session_id="s1")
    mem.add(turns("Hi."), user_id="t:bob", session_id="s1", infer=False)
    assert mem.users() == ["t:alice", "t:bob"] and mem.users("t:b") == ["t:bob"]
    assert [s.status for s in mem.sessions("t:bob")] == ["deferred"]
    rec = mem.session("s1", user_id="t:alice")
    assert rec is not None and rec.status == "applied"
