"""Cost metrics: write amplification and queries per memory, from adapter-reported
figures (deltamem's AddResult.cost) and from hand-made session records."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops

from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.systems.deltamem_system import DeltamemSystem
from deltamem.bench.systems.turns import RetrievalSystem
from deltamem.embed import Embedder

T = datetime(2031, 3, 2, 9, 0, tzinfo=UTC)


class WordLLM(ScriptedLLM):
    """Counts a token per word, so the model's count differs from the harness's
    4-characters estimate and a test can tell which one was used."""

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def session(user_line: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": user_line, "timestamp": T.isoformat()},
        {"role": "assistant", "content": "Noted, thanks.", "timestamp": T.isoformat()},
    ]


def test_deltamem_cost_comes_from_add_result(tmp_path: Path, embedder: Embedder) -> None:
    llm = WordLLM(
        [
            ops(add("Ana Silva works as a nurse in Leeds."), add("Ana Silva owns a cat.")),
            ops(),
        ]
    )
    system = DeltamemSystem(llm, embedder, tmp_path / "dm.db", config=SESSION)
    s1 = session("I am a nurse in Leeds and I have a cat.")
    system.add_session("ana", "s1", s1, T)
    c = system.cost
    # words of "user: I am a nurse in Leeds and I have a cat." + "assistant: Noted, thanks."
    assert c.session_tokens == 12 + 3
    assert c.llm_calls == 1 and c.memories_stored == 2 and c.search_queries == 0
    assert c.prompt_tokens == llm.usage.prompt_tokens > 0
    system.add_session("ana", "s2", session("The weather is nice today."), T)
    assert c.llm_calls == 2 and c.memories_stored == 2 and c.sessions == 2
    # the same session again is answered from the log: no LLM, nothing stored
    spent = c.prompt_tokens
    system.add_session("ana", "s1", s1, T)
    assert c.llm_calls == 2 and c.prompt_tokens == spent and c.memories_stored == 2
    system.close()


def test_turn_baseline_stores_turns_and_never_queries(embedder: Embedder) -> None:
    s = RetrievalSystem(embedder)
    s.add_session("u", "a", session("I like tea."), T)
    assert s.cost.memories_stored == 2 and s.cost.search_queries == 0
    assert s.cost.prompt_tokens == 0


def sess(i: int, **cost: float) -> dict[str, Any]:
    return {"kind": "session", "system": "x", "user": "u", "session": i, "cost": cost}


def test_write_amplification_and_qpm_on_records() -> None:
    records = [
        sess(0, session_tokens=100, prompt_tokens=250, cached_tokens=50, llm_calls=3,
             search_queries=2, memories_stored=2, add_seconds=2.0),
        sess(1, session_tokens=100, prompt_tokens=350, cached_tokens=150, llm_calls=5,
             search_queries=4, memories_stored=4, add_seconds=4.0),
        sess(1, session_tokens=200, prompt_tokens=400, cached_tokens=0, llm_calls=1,
             search_queries=0, memories_stored=6, add_seconds=6.0),
        {"kind": "question", "system": "x", "session": 1, "search_seconds": 0.5},
        {"kind": "update", "system": "x", "session": 1, "search_seconds": 1.5},
    ]  # fmt: skip
    c = cost_metrics(records)
    assert c["write_amplification"] == pytest.approx(1000 / 400)
    assert c["write_amplification_uncached"] == pytest.approx((1000 - 200) / 400)
    assert c["qpm"] == pytest.approx(6 / 12)  # queries per stored memory, not per minute
    assert c["llm_calls_per_session"] == pytest.approx(3.0)
    assert c["read_searches"] == 2 and c["seconds_per_search"] == pytest.approx(1.0)
    assert [b["session"] for b in c["by_session"]] == [0, 1]
    assert c["by_session"][1]["add_seconds"] == pytest.approx(5.0)
    assert c["by_session"][1]["prompt_tokens"] == pytest.approx(375.0)


def test_nothing_stored_or_read_gives_none_not_zero() -> None:
    c = cost_metrics([sess(0, session_tokens=0, prompt_tokens=0)])
    assert c["qpm"] is None and c["write_amplification"] is None
    assert c["seconds_per_search"] is None
