"""Excerpts whose facts a later session changed are left out of what `answer` reads
(deltamem/superseded.py); `search` still returns them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops, update

from deltamem.memory import Memory

JOB = [{"role": "user", "content": "I work as a UX designer at Brightloop."}]


@pytest.fixture
def mem(make_memory: Callable[..., Memory], llm: ScriptedLLM) -> Memory:
    """Facts and the turns they were written from beside the raw turns: what is left
    out is checked in both."""
    return make_memory(llm, dataclasses.replace(SESSION, beside="both"))


def says(mem: Memory, text: str, session_id: str, timestamp: str) -> None:
    """Alice says `text` in a session of its own (the scripted reply pushed before)."""
    mem.add(
        [{"role": "user", "content": text}],
        user_id="alice",
        session_id=session_id,
        timestamp=timestamp,
    )


def read(mem: Memory, question: str) -> list[str]:
    return [h.memory.content for h in mem.context(question, user_id="alice")]


def excerpts(hits: list[Any]) -> list[str]:
    return [h.memory.content for h in hits if h.kind == "episode"]


def test_an_excerpt_whose_fact_ended_is_not_read(mem: Memory, llm: ScriptedLLM) -> None:
    asked = {"role": "assistant", "content": "How do you like the work at Brightloop?"}
    llm.push(ops(add("Alice works as a UX designer at Brightloop.")))
    mem.add([*JOB, asked], user_id="alice", session_id="s1", timestamp="2025-01-01")
    llm.push(ops(update("m1", "Alice left Brightloop.")))
    left = [{"role": "user", "content": "I left Brightloop and teach yoga now."}]
    mem.add(left, user_id="alice", session_id="s2", timestamp="2025-06-01")

    searched = excerpts(mem.search("Where does Alice work?", user_id="alice"))
    assert JOB[0]["content"] in searched  # the log still holds it
    read = excerpts(mem.context("Where does Alice work?", user_id="alice"))
    assert JOB[0]["content"] not in read
    # the assistant's turn that names what ended is as outdated as the person's
    assert asked["content"] not in read
    assert left[0]["content"] in read


def test_an_excerpt_whose_fact_was_only_made_richer_is_read(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice works at Brightloop.")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    llm.push(ops(update("m1", "Alice works at Brightloop as a lead designer.")))
    promoted = [{"role": "user", "content": "I got promoted to lead designer!"}]
    mem.add(promoted, user_id="alice", session_id="s2", timestamp="2025-06-01")

    read = excerpts(mem.context("Where does Alice work?", user_id="alice"))
    assert JOB[0]["content"] in read


def test_an_excerpt_whose_fact_was_deleted_is_not_read(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice works as a UX designer at Brightloop.")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    [fact] = mem.get_all(user_id="alice")
    mem.delete(fact.id)
    assert excerpts(mem.context("Where does Alice work?", user_id="alice")) == []


def test_a_memory_a_later_fact_ends_is_stored_as_outdated(mem: Memory, llm: ScriptedLLM) -> None:
    # a packed fact the update did not replace: it names the employer that ended
    llm.push(ops(add("Alice works at Brightloop, learns Portuguese and has a cat.")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    llm.push(ops(add("Alice left Brightloop.")))
    left = [{"role": "user", "content": "I have left Brightloop."}]
    mem.add(left, user_id="alice", session_id="s2", timestamp="2025-06-01")

    facts = [h.memory.content for h in mem.context("Where does Alice work?", user_id="alice")
             if h.kind == "fact"]  # fmt: skip
    assert facts == ["Alice left Brightloop."]
    # outdated when the ending was written, not worked out on a read: get_all holds the
    # current memory, the old one keeps its history and says what outdated it
    (left_fact,) = mem.get_all(user_id="alice")
    everything = mem.get_all(user_id="alice", filters={"outdated": True})
    (old,) = [m for m in everything if m.id != left_fact.id]
    assert old.invalid_at is not None and old.invalid_at.year == 2025 and old.invalid_at.month == 6
    assert old.superseded_by == left_fact.id
    assert [h.op for h in mem.history(old.id)] == ["add", "invalidate"]
    assert all(h.memory.id != old.id for h in mem.search("Brightloop", user_id="alice"))


@pytest.mark.anyio
async def test_the_async_facade_reads_the_same(mem: Memory, llm: ScriptedLLM) -> None:
    from deltamem.aio import AsyncMemory

    llm.push(ops(add("Alice works as a UX designer at Brightloop.")))
    mem.add(JOB, user_id="alice", session_id="s1", timestamp="2025-01-01")
    amem = AsyncMemory(memory=mem)
    hits = await amem.context("Where does Alice work?", user_id="alice")
    assert [h.memory.id for h in hits] == [
        h.memory.id for h in mem.context("Where does Alice work?", user_id="alice")
    ]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_an_item_said_before_a_fact_that_takes_it_back_is_not_read(
    mem: Memory, llm: ScriptedLLM
) -> None:
    planned = [{"role": "user", "content": "Our wedding is planned for May 14th."}]
    llm.push(ops(add("Alice is planning a wedding for May 14th.")))
    mem.add(planned, user_id="alice", session_id="s1", timestamp="2025-01-01")
    moved = [{"role": "user", "content": "Sorry, the wedding is on June 14th, not in May."}]
    llm.push(ops(add("Alice's wedding is on June 14th, not in May.")))
    mem.add(moved, user_id="alice", session_id="s2", timestamp="2025-02-01")
    llm.push(ops(add("Alice bought a dress in May.")))  # said after: stays
    says(mem, "I bought a dress for it in May.", "s3", "2025-03-01")

    shown = read(mem, "When is Alice's wedding?")
    assert "Alice is planning a wedding for May 14th." not in shown
    assert planned[0]["content"] not in shown  # the excerpt too
    assert "Alice's wedding is on June 14th, not in May." in shown
    assert "Alice bought a dress in May." in shown


def test_an_item_said_before_an_activity_ended_is_not_read(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice smokes about ten cigarettes a day.")))
    says(mem, "I smoke about ten cigarettes a day.", "s1", "2025-01-01")
    llm.push(ops(add("Alice quit smoking in May.")))
    says(mem, "I quit smoking in May!", "s2", "2025-06-01")
    shown = read(mem, "Does Alice smoke?")
    assert "Alice smokes about ten cigarettes a day." not in shown
    assert "I smoke about ten cigarettes a day." not in shown
    assert "Alice quit smoking in May." in shown


def test_only_the_sentence_that_said_an_outdated_value_is_left_out(
    mem: Memory, llm: ScriptedLLM
) -> None:
    said = "I work at Oracle as a manager. My monthly income is 15600 USD."
    llm.push(ops(add("Alice works at Oracle as a manager."), add("Alice earns 15600 USD a month.")))
    mem.add([{"role": "user", "content": said}], user_id="alice", session_id="s1",
            timestamp="2025-01-01")  # fmt: skip
    llm.push(ops(update("m1", "Alice earns 18000 USD a month.")))  # m1: the nearest
    says(mem, "My income went up to 18000 USD a month.", "s2", "2025-06-01")
    read = excerpts(mem.context("How much does Alice earn?", user_id="alice"))
    assert "I work at Oracle as a manager." in read  # the turn, less its outdated sentence
    assert said not in read


def cello_then_no_coffee(mem: Memory, llm: ScriptedLLM, said: str) -> None:
    """Lena says `said` (her cello and her coffee, two facts naming her), then a later
    session takes the coffee back."""
    llm.push(
        ops(
            add("Lena Vogel plays cello in the Bonn Orchestra."),
            add("Lena Vogel drinks coffee at Café Rosa every morning."),
        )
    )
    says(mem, said, "s1", "2025-01-01")
    llm.push(ops(add("Lena Vogel no longer drinks coffee at Café Rosa.")))
    says(mem, "I no longer drink coffee at Café Rosa.", "s2", "2025-06-01")


def test_the_persons_name_is_no_value_the_turn_must_say(mem: Memory, llm: ScriptedLLM) -> None:
    # the facts name Lena Vogel, her message does not: the sentence that said the
    # outdated fact goes, the rest of the turn stays
    said = "I play cello in the Bonn Orchestra. I drink coffee at Café Rosa every morning."
    cello_then_no_coffee(mem, llm, said)
    read = excerpts(mem.context("Where does Lena drink coffee?", user_id="alice"))
    assert "I play cello in the Bonn Orchestra." in read
    assert said not in read


def test_a_sentence_that_says_a_fact_still_holding_stays(mem: Memory, llm: ScriptedLLM) -> None:
    # the outdated coffee and the current orchestra in one sentence: raw search would
    # show it, so the answerer reads it too
    said = "I play cello in the Bonn Orchestra and drink coffee at Café Rosa every morning."
    cello_then_no_coffee(mem, llm, said)
    assert said in excerpts(mem.context("Which orchestra does Lena play in?", user_id="alice"))


def test_an_outdated_fact_without_values_is_found_by_its_words(
    mem: Memory, llm: ScriptedLLM
) -> None:
    # "smokes a few cigarettes a day" names no place, person or number: the sentence
    # holding its words goes, the climbing and the sister stay (the whole turn went)
    said = "I climb on weekends. I still smoke a few cigarettes a day. My sister is an architect."
    llm.push(
        ops(
            add("Claire Dubois climbs on weekends."),
            add("Claire Dubois smokes a few cigarettes a day."),
            add("Claire Dubois's sister is an architect."),
        )
    )
    mem.add([{"role": "user", "content": said}], user_id="alice", session_id="s1",
            timestamp="2025-01-01")  # fmt: skip
    llm.push(ops(add("Claire Dubois no longer smokes cigarettes.")))
    says(mem, "I no longer smoke cigarettes.", "s2", "2025-06-01")
    read = excerpts(mem.context("What does Claire do on weekends?", user_id="alice"))
    assert "I climb on weekends. My sister is an architect." in read
