"""What `answer` reads beside the raw turns (`ManagerConfig.beside`): the best facts,
the turns those facts were written from, or both (`Memory.context`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from conftest import SESSION
from fakes import ScriptedLLM, add, ops

from deltamem.manager.agent import ManagerConfig
from deltamem.memory import Memory
from deltamem.retrieval.hybrid import Beside

# the fact's turn says the dog's name in other words than the question's
TURNS = [
    "We adopted a beagle puppy last spring and called him Rufus.",
    "Work has been hectic, I barely sleep before deadlines.",
    "I finally repainted the kitchen a pale green.",
    "My sister is visiting from Porto next month.",
]
QUESTION = "What is the name of Alice's dog?"


def written(make_memory: Callable[..., Memory], beside: Beside) -> Memory:
    llm = ScriptedLLM()
    mem = make_memory(llm, dataclasses.replace(SESSION, beside=beside), name=beside)
    llm.push(ops(add("Alice has a dog named Rufus.")))
    messages = [{"role": "user", "content": t} for t in TURNS]
    mem.add(messages, user_id="alice", session_id="s1", timestamp="2025-03-01")
    return mem


def read(mem: Memory, limit: int) -> list[tuple[str, str]]:
    return [(h.kind, h.memory.content) for h in mem.context(QUESTION, user_id="alice", limit=limit)]


def test_the_fact_the_store_wrote_has_its_turn(make_memory: Callable[..., Memory]) -> None:
    mem = written(make_memory, "facts")
    [fact] = mem.get_all(user_id="alice")
    assert fact.turns and all(0 <= t < len(TURNS) for t in fact.turns)


@pytest.mark.parametrize("beside", ["facts", "turns", "both"])
def test_the_raw_turns_a_plain_search_finds_come_first_whatever_is_beside(
    make_memory: Callable[..., Memory], beside: Beside
) -> None:
    mem = written(make_memory, beside)
    plain = [
        (h.kind, h.memory.content) for h in mem.searcher.beside(QUESTION, "alice", limit=2, facts=0)
    ]
    assert read(mem, 2)[:2] == plain


def test_turns_beside_lead_each_fact_to_its_words_and_show_no_fact(
    make_memory: Callable[..., Memory],
) -> None:
    mem = written(make_memory, "turns")
    [fact] = mem.get_all(user_id="alice")
    source = {TURNS[t] for t in fact.turns}
    got = read(mem, 2)  # two raw turns, one fact (limit // 2)
    assert all(kind == "episode" for kind, _ in got)
    assert source <= {text for _, text in got}


def test_both_shows_the_fact_and_its_turn(make_memory: Callable[..., Memory]) -> None:
    mem = written(make_memory, "both")
    [fact] = mem.get_all(user_id="alice")
    got = read(mem, 2)
    assert ("fact", fact.content) in got
    assert {TURNS[t] for t in fact.turns} <= {text for kind, text in got if kind == "episode"}


def test_a_turn_already_shown_is_not_shown_twice(make_memory: Callable[..., Memory]) -> None:
    mem = written(make_memory, "turns")
    got = read(mem, 20)  # every turn is among the raw ones
    assert len(got) == len(set(got)) == len(TURNS)


def test_turns_beside_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELTAMEM_BESIDE", raising=False)
    assert ManagerConfig().beside == ManagerConfig.from_env().beside == "turns"


def test_facts_beside_reads_the_facts(make_memory: Callable[..., Memory]) -> None:
    mem = written(make_memory, "facts")
    got = read(mem, 2)
    assert [kind for kind, _ in got] == ["episode", "episode", "fact"]


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAMEM_BESIDE", "turns")
    assert ManagerConfig.from_env().beside == "turns"
    monkeypatch.setenv("DELTAMEM_BESIDE", "everything")
    with pytest.raises(ValueError, match="DELTAMEM_BESIDE"):
        ManagerConfig.from_env()


def test_a_fact_brings_its_turn_where_the_raw_search_did_not_reach_it(
    make_memory: Callable[..., Memory],
) -> None:
    mem = written(make_memory, "turns")
    question = "Who is visiting Alice from Porto next month?"
    plain = [h.memory.content for h in mem.searcher.beside(question, "alice", limit=2, facts=0)]
    assert TURNS[0] not in plain  # the raw search alone does not reach the dog
    got = [h.memory.content for h in mem.context(question, user_id="alice", limit=2)]
    assert TURNS[0] in got  # the one fact (the dog's) led to its turn


def test_how_many_facts_lead_is_a_setting(make_memory: Callable[..., Memory]) -> None:
    question = "Who is visiting Alice from Porto next month?"
    led = written(make_memory, "turns")
    assert TURNS[0] in [h.memory.content for h in led.context(question, user_id="alice", limit=2)]
    llm = ScriptedLLM()
    none = make_memory(
        llm, dataclasses.replace(SESSION, beside="turns", beside_facts=0), name="none"
    )
    llm.push(ops(add("Alice has a dog named Rufus.")))
    none.add(
        [{"role": "user", "content": t} for t in TURNS],
        user_id="alice",
        session_id="s1",
        timestamp="2025-03-01",
    )
    assert none.get_all(user_id="alice")  # the fact is there, and leads nowhere
    # with no fact leading, what is read is the raw search's turns alone
    plain = [h.memory.content for h in none.searcher.beside(question, "alice", limit=2, facts=0)]
    assert [h.memory.content for h in none.context(question, user_id="alice", limit=2)] == plain


def test_the_number_of_leading_facts_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DELTAMEM_BESIDE_FACTS", raising=False)
    assert ManagerConfig.from_env().beside_facts is None  # half the turns read
    monkeypatch.setenv("DELTAMEM_BESIDE_FACTS", "3")
    assert ManagerConfig.from_env().beside_facts == 3
    for bad in ("-1", "three"):
        monkeypatch.setenv("DELTAMEM_BESIDE_FACTS", bad)
        with pytest.raises(ValueError, match="DELTAMEM_BESIDE_FACTS"):
            ManagerConfig.from_env()
