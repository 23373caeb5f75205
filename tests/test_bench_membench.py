"""The MemBench runner on tiny fixtures in the official schema, with a scripted LLM;
its metrics on cases worked out by hand."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakes import SESSION, ScriptedLLM, add, ops
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.choice import PROMPTS as CHOICE_PROMPTS
from deltamem.bench.cli import app
from deltamem.bench.datasets import membench as ds
from deltamem.bench.log import read_records
from deltamem.bench.membench import MemBenchRun, draw_noise, noise_pool, run_membench
from deltamem.bench.metrics import membench as mb
from deltamem.bench.metrics import qa
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIX = Path(__file__).parent / "fixtures" / "membench_tiny.json"
TESTSET = Path(__file__).parent / "fixtures" / "membench_testset_tiny.json"
CHOICE_SYSTEM = (CHOICE_PROMPTS / "choice.system.txt").read_text(encoding="utf-8").strip()

# the letter the scripted model picks per question: 3 of the 4 fixture questions right
# (Leo's bicycle is red, "C"; the model says "A")
PICKS = {
    "Where does the user's sister live?": "B",
    "What is the parrot called?": "A",
    "What colour is Leo's bicycle?": "A",
    "Which film would Mia most likely enjoy next?": "B",
    "What is my brother's job?": "D",
    "How many people moved to Porto?": "C",
}


def question_of(messages: list[ChatMessage]) -> str:
    return re.search(r"Question: (.*)\n", messages[-1]["content"]).group(1)  # type: ignore[union-attr]


def reply(messages: list[ChatMessage]) -> Any:
    if messages[0]["content"] == CHOICE_SYSTEM:
        return {"answer": PICKS[question_of(messages)]}
    if "My sister Ana lives in Porto" in messages[-1]["content"]:
        return ops(add("The user's sister Ana lives in Porto."))
    return ops()


def records(out: Path) -> list[dict[str, Any]]:
    return list(read_records(out / "results.jsonl"))


def questions(out: Path, system: str | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in records(out)
        if r["kind"] == "question" and (system is None or r["system"] == system)
    ]


# --- metrics by hand -------------------------------------------------------------------
def test_recall_at_k_by_hand() -> None:
    ranked = [["3"], [], ["1", "2"], ["noise_0"]]
    assert qa.recall_at_k(["1", "3"], ranked, 1) == 0.5
    assert qa.recall_at_k(["1", "3"], ranked, 2) == 0.5  # an item without provenance
    assert qa.recall_at_k(["1", "3"], ranked, 3) == 1.0
    assert qa.recall_at_k([1, 3], ranked, 10) == 1.0  # ids compared as text
    assert qa.recall_at_k(["1", "1"], ranked, 3) == 1.0  # a repeated target counts once
    assert qa.recall_at_k(["1"], ranked, 0) == 0.0
    assert qa.recall_at_k([], ranked, 3) is None  # no target: not scored
    assert qa.cutoffs(10) == [1, 5, 10] and qa.cutoffs(3) == [1, 3] and qa.cutoffs(20)[-1] == 20


def test_capacity_buckets_by_hand() -> None:
    qs = [
        {"history_steps": 3, "correct": True, "history_tokens": 30},
        {"history_steps": 5, "correct": False, "history_tokens": 50},
        {"history_steps": 12, "correct": True, "history_tokens": 120},
        {"history_steps": 60, "correct": True, "history_tokens": 600},
        {"history_steps": 100, "correct": False, "history_tokens": 1000},
        {"history_steps": 10**6, "correct": True},
    ]
    cap = mb.capacity(qs)
    assert [c["bucket"] for c in cap] == ["≤5", "≤20", "≤100", ">50,000"]
    assert [c["n"] for c in cap] == [2, 1, 2, 1]
    assert [c["accuracy"] for c in cap] == [0.5, 1.0, 0.5, 1.0]
    assert cap[0]["history_steps"] == 4.0 and cap[2]["history_tokens"] == 800.0
    assert mb.bucket(21) == 50 and mb.bucket(50) == 50


def test_aggregate_by_hand() -> None:
    def q(scenario: str, level: str, qa_type: str, correct: bool | None, r1: float) -> dict:
        return {
            "kind": "question",
            "scenario": scenario,
            "level": level,
            "qa_type": qa_type,
            "correct": correct,
            "recall": r1,
            "recall_at": {"1": r1, "5": 1.0},
            "history_steps": 4,
            "search_seconds": 0.2,
            "answer_seconds": 1.0,
        }

    recs = [
        q("participation", "factual", "simple", True, 1.0),
        q("participation", "reflective", "highlevel", False, 0.0),
        q("observation", "factual", "simple", True, 0.5),
        q("observation", "factual", "noisy", None, 0.5),  # no ground truth: not scored
        {"kind": "session", "cost": {"add_seconds": 0.5}},
        {"kind": "session", "cost": {"add_seconds": 1.5}, "error": "x"},
    ]
    m = mb.aggregate(recs)
    assert m["accuracy"] == pytest.approx(2 / 3) and m["n"] == 4 and m["errors"] == 1
    assert m["recall_at_k"] == {"1": 0.5, "5": 1.0}
    assert m["by_scenario"]["participation"] == {"n": 2, "accuracy": 0.5, "recall": 0.5}
    assert m["by_scenario"]["observation"]["accuracy"] == 1.0
    assert m["by_level"]["reflective"]["accuracy"] == 0.0
    assert m["by_level"]["factual"]["accuracy"] == 1.0
    assert list(m["by_qa_type"]) == ["simple", "highlevel", "noisy"]
    assert m["by_qa_type"]["noisy"] == {"n": 1, "accuracy": None, "recall": 0.5}
    assert m["timing"] == {
        "write_seconds_per_step": 1.0,
        "read_seconds_per_question": pytest.approx(0.2),
        "answer_seconds_per_question": 1.0,
    }


# --- loader ----------------------------------------------------------------------------
def test_official_shapes_scenarios_and_levels() -> None:
    by = {t.key: t for t in ds.iter_trajectories(FIX)}
    assert [(t.setting, t.level) for t in by.values()] == [
        ("participation", "factual"),
        ("participation", "factual"),
        ("observation", "factual"),
        ("observation", "reflective"),
    ]
    movie = by["highlevel:movie:0"]  # [step, session] pairs: the step is the first
    assert movie.qa.target_step_id == [0, 2] and len(movie.steps) == 3
    s = movie.step_session(2)
    assert s.messages[0]["content"] == "Mia rated Hereditary five stars. (place: home)"
    assert s.timestamp is not None and s.timestamp.day == 8
    # the test sets: {user, agent} dicts and strings, noise already inserted
    roles, agg = ds.iter_trajectories(TESTSET)
    assert roles.setting == "participation" and agg.setting == "observation"
    assert [m["role"] for m in roles.step_session(1).messages] == ["user", "assistant"]
    assert roles.step_session(1).messages[1]["content"].startswith("A chef in the family")
    assert agg.qa.target_step_id == [1, 3] and agg.step_session(0).timestamp is None
    asked = ds.when(agg.qa.time)  # "'2024-03-10 10:00' Sunday"
    assert asked is not None and (asked.day, asked.hour) == (10, 10)
    assert ds.when("Sunday") is None and ds.when(None) is None


def test_noise_comes_from_other_trajectories_of_the_scenario() -> None:
    trajs = list(ds.iter_trajectories(FIX))
    pool = noise_pool(trajs)
    items = trajs[2]  # observation: its noise is drawn from the other observation trajectory
    drawn = draw_noise(pool, items, 5, seed=0)
    assert len(drawn) == 5
    assert all(s.message and s.message.startswith("Mia") for s in drawn)
    assert draw_noise(pool, items, 5, seed=0) == drawn  # the same on every run
    assert draw_noise(pool, items, 0, seed=0) == []
    assert {s.message for s in drawn} == {s.message for s in trajs[3].steps}  # all before repeats


# --- the runner ------------------------------------------------------------------------
def test_end_to_end_full_system(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    llm = ScriptedLLM(default=reply)
    m = run_membench(MemBenchRun(FIX, out, ["full"]), llm=llm, embedder=embedder)["full"]
    steps = [r for r in records(out) if r["kind"] == "session"]
    assert len(steps) == 2 + 2 + 3 + 3 and not any(r["noise"] for r in steps)
    qs = {q["question"]: q for q in questions(out)}
    # "full" returns every turn oldest first: a participation step is two turns
    sister = qs["Where does the user's sister live?"]
    assert sister["reached"] == [["0"], ["0"], ["1"]] and sister["recall_at"]["1"] == 1.0
    parrot = qs["What is the parrot called?"]
    assert parrot["reached"] == [["0"], ["0"], ["1"], ["1"]]
    assert parrot["recall_at"] == {"1": 0.0, "5": 1.0, "10": 1.0}
    mia = qs["Which film would Mia most likely enjoy next?"]
    assert mia["recall_at"]["1"] == 0.5 and mia["recall"] == 1.0
    assert mia["scenario"] == "observation" and mia["level"] == "reflective"
    assert "user: Mia rated Hereditary five stars. (place: home)" in mia["retrieved"]
    assert [q["correct"] for q in qs.values()] == [True, True, False, True]
    assert m["accuracy"] == 0.75 and m["n"] == 4 and m["errors"] == 0
    assert m["recall_at_k"]["1"] == pytest.approx((1 + 0 + 1 + 0.5) / 4)
    assert m["by_scenario"]["participation"]["accuracy"] == 1.0
    assert m["by_scenario"]["observation"]["accuracy"] == 0.5
    assert m["by_level"] == {
        "factual": {"n": 3, "accuracy": pytest.approx(2 / 3), "recall": 1.0},
        "reflective": {"n": 1, "accuracy": 1.0, "recall": 1.0},
    }
    assert m["capacity"] == [
        {
            "bucket": "≤5",
            "max_steps": 5,
            "n": 4,
            "accuracy": 0.75,
            "history_steps": 2.5,
            "history_tokens": m["capacity"][0]["history_tokens"],
        }
    ]
    assert m["timing"]["write_seconds_per_step"] is not None
    # one letter, constrained to the choice letters, asked with the question's date
    asks = [r for r in llm.requests if r["schema"] is not None]
    assert len(asks) == 4
    assert asks[0]["schema"]["properties"]["answer"]["enum"] == ["A", "B", "C", "D"]
    assert "(C) Madrid" in asks[0]["messages"][-1]["content"]
    assert "Today is 2024-03-03." in asks[0]["messages"][-1]["content"]
    page = (out / "report.html").read_text()
    assert "MemBench" in page and "Accuracy by scenario" in page and "Capacity" in page


def test_deltamem_facts_map_back_to_their_step(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltamem.bench.systems.deltamem_system import DeltamemSystem
    from deltamem.bench.systems.factory import SYSTEMS

    both = dataclasses.replace(SESSION, beside="both")  # the facts read beside their turns
    monkeypatch.setitem(
        SYSTEMS, "deltamem", lambda llm, emb, work: DeltamemSystem(llm, emb, work / "d.db", both)
    )
    out = tmp_path / "run"
    run = MemBenchRun(FIX, out, ["deltamem"], trajectories=1, qa_k=3)
    run_membench(run, llm=ScriptedLLM(default=reply), embedder=embedder)
    (q,) = questions(out)
    fact = q["retrieved"].index("The user's sister Ana lives in Porto.")
    assert q["reached"][fact] == ["0"] and q["recall"] == 1.0 and q["correct"]


def test_noise_grows_the_history_and_runs_share_a_dir(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    base = {"data": FIX, "out": out, "systems": ["recent"], "qa_k": 2}
    run_membench(MemBenchRun(**base), llm=ScriptedLLM(default=reply), embedder=embedder)
    m = run_membench(
        MemBenchRun(**base, noise=5, resume=True),
        llm=ScriptedLLM(default=reply),
        embedder=embedder,
    )["recent"]
    noisy = [q for q in questions(out) if q["noise"] == 5]
    assert len(noisy) == 4 and {q["history_steps"] for q in noisy} == {7, 8}
    # "recent" sees only the last two turns: the noise steps, never the targets
    assert all(q["recall"] == 0.0 for q in noisy)
    assert [c["bucket"] for c in m["capacity"]] == ["≤5", "≤10"]
    assert [c["n"] for c in m["capacity"]] == [4, 4]
    steps = [r for r in records(out) if r["kind"] == "session" and r["noise"]]
    assert len(steps) == 4 * 5 and all(r["session_id"].startswith("noise_") for r in steps)


def test_resume_does_nothing_new(
    tmp_path: Path, embedder: Embedder, session_strategy: None
) -> None:
    out = tmp_path / "run"
    run_membench(MemBenchRun(FIX, out, ["deltamem", "full"]), llm=ScriptedLLM(default=reply),
                 embedder=embedder)  # fmt: skip
    before = (out / "results.jsonl").read_text()
    idle = ScriptedLLM()  # no replies: any call would fail
    run_membench(
        MemBenchRun(FIX, out, ["deltamem", "full"], resume=True), llm=idle, embedder=embedder
    )
    assert idle.requests == [] and (out / "results.jsonl").read_text() == before


def test_a_reply_outside_the_letters_is_an_error(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run = MemBenchRun(FIX, out, ["full"], trajectories=1)
    m = run_membench(run, llm=ScriptedLLM(default={"answer": "Z"}), embedder=embedder)["full"]
    (q,) = questions(out)
    assert q["prediction"] is None and q["correct"] is False and "answer" in q["error"]
    assert m["accuracy"] == 0.0 and m["errors"] == 1


def test_test_set_file_with_noise_inserted(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    m = run_membench(MemBenchRun(TESTSET, out, ["full"]), llm=ScriptedLLM(default=reply),
                     embedder=embedder)["full"]  # fmt: skip
    qs = {q["question"]: q for q in questions(out)}
    porto = qs["How many people moved to Porto?"]
    assert porto["reached"] == [["0"], ["1"], ["2"], ["3"]]
    assert porto["recall_at"] == {"1": 0.0, "5": 1.0, "10": 1.0}
    assert qs["What is my brother's job?"]["correct"] and not porto["correct"]
    assert m["by_scenario"] == {
        "participation": {"n": 1, "accuracy": 1.0, "recall": 1.0},
        "observation": {"n": 1, "accuracy": 0.0, "recall": 1.0},
    }


def test_membench_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default=reply))
    out = tmp_path / "o"
    args = ["membench", str(FIX), "--systems", "full,recent", "--out", str(out), "--noise", "1"]
    res = CliRunner().invoke(app, [*args, "--per-group", "1"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert set(m) == {"full", "recent"} and m["full"]["benchmark"] == "membench"
    assert m["full"]["n"] == 4 and {q["noise"] for q in questions(out)} == {1}
    res = CliRunner().invoke(app, [*args, "--per-group", "1", "--resume"])
    assert res.exit_code == 0, res.output
    assert len(questions(out)) == 2 * 4  # nothing new
    res = CliRunner().invoke(app, [*args[:-1], "0", "--per-group", "1", "--resume"])
    assert res.exit_code == 0, res.output
    assert len(questions(out)) == 2 * 8  # the same trajectories without noise, beside
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0, res.output
    assert "accuracy and recall by scenario" in res.output and "| full | 0.750 |" in res.output
    assert "Capacity" in res.output and "answer:choice" in res.output
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert "Recall@k of the target steps" in (out / "report.html").read_text()


def test_raw_turn_users_are_dropped_once_finished(tmp_path: Path, embedder: Embedder) -> None:
    from deltamem.bench.systems.turns import FullSystem

    made: list[FullSystem] = []

    def make(name: str, work: Path) -> FullSystem:
        made.append(FullSystem())
        return made[-1]

    run = MemBenchRun(FIX, tmp_path / "run", ["full"])
    run_membench(run, llm=ScriptedLLM(default=reply), embedder=embedder, make=make)
    assert made[0].turns == {}  # nothing kept in memory after the questions
    assert len(questions(tmp_path / "run")) == 4
