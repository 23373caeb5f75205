"""System adapters: one interface, the same accounting, on tiny sessions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM

from deltamem.bench.systems import SYSTEMS, make_system
from deltamem.bench.systems.turns import FullSystem, RecentSystem, RetrievalSystem
from deltamem.embed import Embedder

T = datetime(2031, 3, 2, 9, 0, tzinfo=UTC)


def msgs(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": r, "content": c, "timestamp": T.isoformat()} for r, c in pairs]


S1 = msgs(("user", "I work as a nurse in Leeds."), ("assistant", "Nice."))
S2 = msgs(("user", "My cat is called Pixel."), ("assistant", "Cute name."))


def test_retrieval_searches_raw_turns_by_meaning(embedder: Embedder) -> None:
    s = RetrievalSystem(embedder)
    s.add_session("u", "a", S1, T)
    s.add_session("u", "b", S2, T)
    found = s.search_retrieved("u", "What is the name of the cat?", 1)
    assert found[0].text == "user: My cat is called Pixel."
    assert found[0].kind == "episode" and found[0].speaker == "user"
    assert found[0].content == "My cat is called Pixel."
    assert found[0].session_id == "b" and found[0].turns == [0]
    assert s.get_session_memories("u", "a") == [
        "user: I work as a nurse in Leeds.",
        "assistant: Nice.",
    ]
    assert s.cost.llm_calls == 0 and s.cost.sessions == 2 and s.cost.searches == 1
    assert s.cost.session_tokens > 0
    assert s.search("other-user", "cat", 5) == []
    s.reset("u")
    assert s.search("u", "cat", 5) == []


def test_recent_keeps_last_turns_only() -> None:
    s = RecentSystem(window=3)
    s.add_session("u", "a", S1, T)
    s.add_session("u", "b", S2, T)
    assert s.search("u", "anything", 10) == [
        "assistant: Nice.",
        "user: My cat is called Pixel.",
        "assistant: Cute name.",
    ]
    assert s.search("u", "anything", 1) == ["assistant: Cute name."]
    assert s.get_session_memories("u", "a") == ["assistant: Nice."]


def test_full_truncates_oldest_first_to_budget() -> None:
    s = FullSystem(budget_tokens=14)  # ≈ 4 chars a token
    s.add_session("u", "a", S1, T)
    s.add_session("u", "b", S2, T)
    got = s.search("u", "ignored", 1)
    assert got == ["user: My cat is called Pixel.", "assistant: Cute name."]
    assert FullSystem(budget_tokens=10_000).search("u", "q", 1) == []  # per instance
    big = FullSystem(budget_tokens=10_000)
    big.add_session("u", "a", S1, T)
    assert len(big.search("u", "q", 1)) == 2


def test_names_are_carried_into_turn_text() -> None:
    s = RecentSystem()
    s.add_session("u", "a", [{"role": "assistant", "content": "Hi", "name": "Bob"}], None)
    assert s.search("u", "", 5) == ["Bob: Hi"]


def test_deltamem_adapter_accounts_llm_use(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DELTAMEM_BESIDE", "both")  # the facts shown beside their turns
    llm = ScriptedLLM(default={"facts": ["The user works as a nurse in Leeds."]})
    s = make_system("deltamem", llm, embedder, tmp_path / "deltamem")
    try:
        s.add_session("u", "a", S1, T)
        assert s.get_session_memories("u", "a") == ["The user works as a nurse in Leeds."]
        assert s.cost.llm_calls >= 1 and s.cost.prompt_tokens > 0
        found = s.search_retrieved("u", "Where does the user work as a nurse?", 5)
        [fact] = [r for r in found if r.kind == "fact"]
        assert fact.text == "The user works as a nurse in Leeds."
        assert fact.session_id == "a" and fact.timestamp is not None
        # the product searches the session's raw turns too; deltamem-facts does not
        assert {r.text for r in found if r.kind == "episode"} == {
            "user: I work as a nurse in Leeds.",
            "assistant: Nice.",
        }
        # deltamem-facts reads the same bank (it lies beside its own work dir)
        facts_only = make_system("deltamem-facts", llm, embedder, tmp_path / "deltamem-facts")
        try:
            assert facts_only.name == "deltamem-facts" and facts_only.bank_of == "deltamem"
            got = facts_only.search_retrieved("u", "Where does the user work?", 5)
            assert [r.kind for r in got] == ["fact"]
        finally:
            facts_only.close()
        calls = s.cost.llm_calls
        s.add_session("u", "a", S1, T)  # already applied: no LLM
        assert s.cost.llm_calls == calls
        s.reset("u")
        assert s.search("u", "nurse", 5) == []
    finally:
        s.close()


def test_registry() -> None:
    assert set(SYSTEMS) == {
        "deltamem",
        "deltamem-facts",
        "deltamem-session",
        "pipeline",
        "retrieval",
        "recent",
        "full",
        "mem0",
    }
    with pytest.raises(ValueError, match="unknown system"):
        make_system("nope", ScriptedLLM(), None, Path("."))  # type: ignore[arg-type]
