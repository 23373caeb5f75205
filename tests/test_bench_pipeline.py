"""The Mem0-style `pipeline` baseline: a scripted LLM, the real embedder and a
real SQLite store. Each test scripts the extraction reply and one decision per
fact, and checks what reaches the store, the calls made and the cost logged."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM

from deltamem.bench.systems import make_system
from deltamem.bench.systems.pipeline import DECISION_SCHEMA, FACTS_SCHEMA, PipelineSystem
from deltamem.embed import Embedder
from deltamem.llm.base import LLMOutputError

T1 = datetime(2031, 3, 2, 9, 0, tzinfo=UTC)
T2 = datetime(2031, 6, 9, 9, 0, tzinfo=UTC)


def msgs(*lines: str, t: datetime = T1) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        out += [
            {"role": "user", "content": line, "timestamp": t.isoformat()},
            {"role": "assistant", "content": "I see.", "timestamp": t.isoformat()},
        ]
    return out


def facts(*fs: str) -> dict[str, Any]:
    return {"facts": list(fs)}


def decision(op: str, id_: str = "", memory: str = "") -> dict[str, Any]:
    return {"operation": op, "id": id_, "memory": memory}


def shown_ids(request: dict[str, Any]) -> dict[str, str]:
    """short id -> memory text, as listed in a decision prompt."""
    out = {}
    for line in request["messages"][-1]["content"].splitlines():
        parts = line.split(" | ")
        if len(parts) == 3:
            out[parts[2]] = parts[0]
    return out


@pytest.fixture
def seeded(tmp_path: Path, embedder: Embedder) -> tuple[PipelineSystem, ScriptedLLM]:
    """A pipeline whose first session stored two memories about Ana."""
    llm = ScriptedLLM(
        [
            facts("Ana Silva works as a nurse in Leeds.", "Ana Silva has a cat named Pixel."),
            decision("ADD", memory="Ana Silva works as a nurse in Leeds."),
            decision("ADD", memory="Ana Silva has a cat named Pixel."),
        ]
    )
    system = PipelineSystem(llm, embedder, tmp_path / "p.db")
    system.add_session("ana", "s1", msgs("I'm a nurse in Leeds.", "My cat Pixel is great."), T1)
    return system, llm


def test_add_extracts_then_decides_per_fact(
    seeded: tuple[PipelineSystem, ScriptedLLM],
) -> None:
    system, llm = seeded
    assert system.get_session_memories("ana", "s1") == [
        "Ana Silva works as a nurse in Leeds.",
        "Ana Silva has a cat named Pixel.",
    ]
    # 1 extraction + 2 decisions, each schema-constrained
    assert len(llm.requests) == 3
    assert llm.requests[0]["schema"] == FACTS_SCHEMA
    assert all(r["schema"] == DECISION_SCHEMA for r in llm.requests[1:])
    assert "I'm a nurse in Leeds." in llm.requests[0]["messages"][-1]["content"]
    assert "Ana Silva has a cat named Pixel." in llm.requests[2]["messages"][-1]["content"]
    c = system.cost
    assert c.llm_calls == 3 and c.search_queries == 2 and c.memories_stored == 2
    assert c.prompt_tokens == llm.usage.prompt_tokens
    assert c.completion_tokens == llm.usage.completion_tokens
    hit = system.search_retrieved("ana", "Where does Ana work?", 1)[0]
    assert hit.text == "Ana Silva works as a nurse in Leeds." and hit.turns == [0]
    system.close()


def test_update_rewrites_the_memory_it_names(
    seeded: tuple[PipelineSystem, ScriptedLLM],
) -> None:
    system, llm = seeded
    new = "Ana Silva works as a nurse in York, having moved from Leeds."

    def decide(messages: list[dict[str, str]]) -> dict[str, Any]:
        ids = shown_ids({"messages": messages})
        return decision("UPDATE", ids["Ana Silva works as a nurse in Leeds."], new)

    llm.push(facts("Ana Silva now works as a nurse in York."), decide)
    system.add_session("ana", "s2", msgs("I moved to York, same job.", t=T2), T2)
    mems = {m.content: m for m in system.memory.get_all(user_id="ana")}
    assert set(mems) == {new, "Ana Silva has a cat named Pixel."}  # Pixel untouched
    assert mems[new].version == 2
    history = system.memory.history(mems[new].id)
    assert [h.old_content for h in history if h.op == "update"] == [
        "Ana Silva works as a nurse in Leeds."
    ]
    assert system.get_session_memories("ana", "s2") == [new]
    assert system.decisions["UPDATE"] == 1
    system.close()


def test_delete_removes_the_named_memory(seeded: tuple[PipelineSystem, ScriptedLLM]) -> None:
    system, llm = seeded

    def decide(messages: list[dict[str, str]]) -> dict[str, Any]:
        return decision(
            "DELETE", shown_ids({"messages": messages})["Ana Silva has a cat named Pixel."]
        )

    llm.push(facts("Ana Silva gave her cat Pixel to her sister."), decide)
    system.add_session("ana", "s2", msgs("I gave Pixel to my sister.", t=T2), T2)
    assert [m.content for m in system.memory.get_all(user_id="ana")] == [
        "Ana Silva works as a nurse in Leeds."
    ]
    assert system.get_session_memories("ana", "s2") == []
    assert system.cost.memories_stored == 2  # a deletion stores nothing
    system.close()


def test_none_changes_nothing_and_costs_one_search_per_fact(
    seeded: tuple[PipelineSystem, ScriptedLLM],
) -> None:
    system, llm = seeded
    before = sorted(m.content for m in system.memory.get_all(user_id="ana"))
    llm.push(
        facts("Ana Silva is a nurse.", "Ana Silva lives in Leeds.", "Ana Silva has a cat."),
        decision("NONE", "1"),
        decision("NONE", ""),
        decision("NONE", "2"),
    )
    calls = len(llm.requests)
    system.add_session("ana", "s2", msgs("Still nursing in Leeds with my cat.", t=T2), T2)
    assert sorted(m.content for m in system.memory.get_all(user_id="ana")) == before
    assert len(llm.requests) - calls == 1 + 3
    c = system.cost
    assert c.llm_calls == 3 + 4 and c.search_queries == 2 + 3 and c.memories_stored == 2
    ops = system.memory.session_operations("s2", user_id="ana")
    assert [o.op for o in ops] == ["none", "none", "none"]
    system.close()


def test_later_fact_updates_an_add_of_the_same_session(tmp_path: Path, embedder: Embedder) -> None:
    def decide(messages: list[dict[str, str]]) -> dict[str, Any]:
        ids = shown_ids({"messages": messages})
        return decision(
            "UPDATE", ids["Ben Ode plays the violin."], "Ben Ode plays the violin in an orchestra."
        )

    llm = ScriptedLLM(
        [
            facts("Ben Ode plays the violin.", "Ben Ode plays violin in an orchestra."),
            decision("ADD", memory="Ben Ode plays the violin."),
            decide,
        ]
    )
    system = PipelineSystem(llm, embedder, tmp_path / "p.db")
    system.add_session("ben", "s1", msgs("I play violin in an orchestra."), T1)
    assert system.get_session_memories("ben", "s1") == ["Ben Ode plays the violin in an orchestra."]
    system.close()


def test_replayed_session_and_failures(tmp_path: Path, embedder: Embedder) -> None:
    llm = ScriptedLLM([facts("Cy likes tea."), decision("UPDATE", "9", "Cy likes green tea.")])
    system = make_system("pipeline", llm, embedder, tmp_path / "w")
    assert isinstance(system, PipelineSystem)
    session = msgs("I like green tea.")
    system.add_session("cy", "s1", session, T1)
    # an update naming no shown memory keeps the fact as an add
    assert system.get_session_memories("cy", "s1") == ["Cy likes green tea."]
    calls = len(llm.requests)
    system.add_session("cy", "s1", session, T1)  # already applied: answered from the log
    assert len(llm.requests) == calls and system.cost.memories_stored == 1
    llm.push("not json", "still not json")
    with pytest.raises(Exception) as err:
        system.add_session("cy", "s2", msgs("I like coffee too."), T1)
    assert isinstance(err.value.__cause__, LLMOutputError)
    system.close()


def test_halumem_run_with_pipeline_logs_cost_and_report(tmp_path: Path, embedder: Embedder) -> None:
    from test_bench_halumem import FIX, scripted_reply

    from deltamem.bench.halumem import HaluMemRun, run_halumem
    from deltamem.bench.systems.pipeline import PROMPTS

    extract = (PROMPTS / "pipeline_extract_system.txt").read_text().strip()
    decide = (PROMPTS / "pipeline_decide_system.txt").read_text().strip()

    def reply(messages: list[dict[str, str]]) -> Any:
        system, text = messages[0]["content"], messages[-1]["content"]
        if system == extract:
            if "Pixel keeps me company" in text:
                return facts(
                    "Dana Reyes works as a nurse in Leeds.", "Dana Reyes has a cat named Pixel."
                )
            if "York instead of Leeds" in text:
                return facts("Dana Reyes now works as a nurse in York.")
            return facts()
        if system == decide:
            fact = text.rsplit("New fact:", 1)[1].strip()
            ids = shown_ids({"messages": messages})
            if "York" in fact and "Dana Reyes works as a nurse in Leeds." in ids:
                return decision("UPDATE", ids["Dana Reyes works as a nurse in Leeds."], fact)
            return decision("ADD", memory=fact)
        return scripted_reply(messages)

    out = tmp_path / "run"
    m = run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["pipeline"], users=1),
        llm=ScriptedLLM(default=reply),
        embedder=embedder,
    )["pipeline"]
    cost = m["cost"]
    # 3 sessions: 2 facts + 0 facts (filler) + 1 fact → 3 queries for 3 stored memories
    assert cost["search_queries"] == 3 and cost["memories_stored"] == 3
    assert cost["qpm"] == pytest.approx(1.0)
    assert cost["llm_calls"] == (1 + 2) + 1 + (1 + 1)
    assert cost["write_amplification"] > 1
    assert m["retrieval"]["update_hit_at_10"] == 1.0
    assert "pipeline" in (out / "report.html").read_text()
