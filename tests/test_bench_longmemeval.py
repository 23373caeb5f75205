"""The LongMemEval runner on a tiny fixture in the official schema (an abstention
question, evidence in an assistant turn, two answer sessions), with a scripted
model and judge; its metrics on cases worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.cli import app
from deltamem.bench.datasets import longmemeval as ds
from deltamem.bench.judges.base import PROMPTS as JUDGE_PROMPTS
from deltamem.bench.judges.base import JudgeCache
from deltamem.bench.judges.sets import make_judges
from deltamem.bench.log import read_records
from deltamem.bench.longmemeval import (
    LongMemEvalRun,
    answer_f1,
    evidence_turns,
    judge_answer,
    run_longmemeval,
)
from deltamem.bench.metrics import longmemeval as lme
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIX = Path(__file__).parent / "fixtures" / "longmemeval_tiny.json"
ANSWER_SYSTEM = (
    Path(__file__).parent.parent / "deltamem" / "prompts" / "answer_system.txt"
).read_text(encoding="utf-8")
QA_RUBRIC = (JUDGE_PROMPTS / "qa.system.txt").read_text(encoding="utf-8").strip()

ANSWERS = {
    "What colour is my car?": "Your car is blue.",
    "What is my boat called?": "That is not known from memory.",
    "Which aquarium did you recommend to me in Lisbon?": "I recommended the Lisbon Oceanarium.",
    "How many pets do I have?": "You have one pet.",
}


def answer(messages: list[ChatMessage]) -> Any:
    assert messages[0]["content"] == ANSWER_SYSTEM
    question = messages[-1]["content"].rsplit("Question: ", 1)[1].strip()
    return ANSWERS[question]


def judge(messages: list[ChatMessage]) -> Any:
    assert messages[0]["content"] == QA_RUBRIC
    pred = messages[-1]["content"].rsplit("Assistant's answer:", 1)[1]
    return {"reason": "-", "verdict": "hallucination" if "one pet" in pred else "correct"}


def instances() -> dict[str, ds.Instance]:
    return {i.question_id: i for i in ds.load(FIX)}


def questions(out: Path) -> dict[str, dict[str, Any]]:
    return {
        r["question_id"]: r for r in read_records(out / "results.jsonl") if r["kind"] == "question"
    }


def test_evidence_turns_and_judge_free_f1_by_hand() -> None:
    inst = instances()
    assert evidence_turns(inst["q1"]) == ["sess_a:0"]
    assert evidence_turns(inst["q3"]) == ["lis_1:1"]  # the assistant's own turn
    assert evidence_turns(inst["q4"]) == ["p1:0", "p3:0"]
    assert evidence_turns(inst["q2_abs"]) == []
    # "your car is blue" vs "blue": P 1/4, R 1
    assert answer_f1("Your car is blue.", inst["q1"]) == pytest.approx(0.4)
    # articles dropped, stems compared: {i, recommend, lisbon, oceanarium} vs {lisbon, oceanarium}
    assert answer_f1("I recommended the Lisbon Oceanarium.", inst["q3"]) == pytest.approx(2 / 3)
    # abstention: scored on declining, not on the wording of the explanation
    assert answer_f1("That is not known from memory.", inst["q2_abs"]) == 1.0
    assert answer_f1("Your boat is called Sea Breeze.", inst["q2_abs"]) == 0.0
    assert answer_f1("You never mentioned a boat.", inst["q2_abs"]) == 1.0
    assert answer_f1("You did not tell me its name.", inst["q2_abs"]) == 1.0
    assert answer_f1("You said it was called Sea Breeze.", inst["q2_abs"]) == 0.0


def test_abstention_rule(tmp_path: Path) -> None:
    inst = instances()
    llm = ScriptedLLM(default=judge)
    judges = make_judges(llm, JudgeCache(tmp_path / "c.sqlite"), "rubric")
    # settled in code: no call
    reply = judge_answer(judges, inst["q2_abs"], "I don't know what your boat is called.")
    assert reply["verdict"] == "correct" and llm.requests == []
    # otherwise the judge is told the reference is an abstention
    judge_answer(judges, inst["q2_abs"], "It is called Sea Breeze.")
    item = llm.requests[-1]["messages"][-1]["content"]
    assert "Reference answer: The information is not available from memory: You did not" in item
    # ordinary questions: the reference answer and the has_answer turns as key facts
    judge_answer(judges, inst["q3"], "The Oceanarium.")
    item = llm.requests[-1]["messages"][-1]["content"]
    assert "Reference answer: The Lisbon Oceanarium" in item
    assert "- Then visit the Lisbon Oceanarium" in item


def test_aggregate_by_hand() -> None:
    def q(t: str, abs_: bool, correct: bool | None, f1: float, sr: float | None) -> dict:
        return {
            "kind": "question",
            "question_type": t,
            "abstention": abs_,
            "correct": correct,
            "f1": f1,
            "session_recall": sr,
            "turn_recall": sr,
        }

    recs = [
        q("single-session-user", False, True, 0.5, 1.0),
        q("single-session-user", True, True, 1.0, None),
        q("multi-session", False, False, 0.0, 0.5),
        q("multi-session", False, None, 1.0, 0.0),  # judge skipped (error)
    ]
    m = lme.aggregate([*recs, {"kind": "session", "error": "boom"}])
    assert m["n"] == 4 and m["accuracy"] == pytest.approx(2 / 3) and m["f1"] == 0.625
    assert m["session_recall"] == 0.5 and m["errors"] == 1
    assert m["abstention"] == {
        "n": 1,
        "accuracy": 1.0,
        "f1": 1.0,
        "session_recall": None,
        "turn_recall": None,
    }
    assert m["by_type"]["single-session-user"]["accuracy"] == 1.0
    assert m["by_type"]["multi-session"] == {
        "n": 2,
        "accuracy": 0.0,
        "f1": 0.5,
        "session_recall": 0.25,
        "turn_recall": 0.25,
    }


def test_end_to_end_with_judge(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    llm, judge_llm = ScriptedLLM(default=answer), ScriptedLLM(default=judge)
    run = LongMemEvalRun(FIX, out, ["full"], judge_mode="rubric")
    m = run_longmemeval(run, llm=llm, embedder=embedder, judge=judge_llm)["full"]
    recs = list(read_records(out / "results.jsonl"))
    sessions = [r for r in recs if r["kind"] == "session"]
    assert len(sessions) == 2 + 1 + 2 + 3
    assert [r["session_id"] for r in sessions if r["user"] == "q4"] == ["p1", "p2", "p3"]
    qs = questions(out)
    # "full" returns every turn: all evidence is reached
    assert qs["q3"]["reached_turns"] == ["lis_1:0", "lis_1:1", "lis_2:0", "lis_2:1"]
    assert qs["q3"]["turn_recall"] == 1.0 and qs["q4"]["session_recall"] == 1.0
    assert qs["q2_abs"]["session_recall"] is None and qs["q2_abs"]["turn_recall"] is None
    assert [qs[k]["verdict"] for k in ("q1", "q2_abs", "q3", "q4")] == [
        "correct",
        "correct",
        "correct",
        "hallucination",
    ]
    assert [qs[k]["f1"] for k in ("q1", "q2_abs", "q3", "q4")] == pytest.approx(
        [0.4, 1.0, 2 / 3, 0.0]
    )
    assert m["accuracy"] == 0.75 and m["abstention"]["accuracy"] == 1.0
    assert m["f1"] == pytest.approx((0.4 + 1 + 2 / 3) / 4)
    assert m["by_type"]["single-session-user"]["n"] == 2  # q1 and q2_abs
    assert m["by_type"]["multi-session"]["accuracy"] == 0.0
    assert m["by_type"]["single-session-assistant"]["accuracy"] == 1.0
    # the abstention question cost no judge call; asked at its question date
    assert len(judge_llm.requests) == 3
    first = llm.requests[0]["messages"][-1]["content"]
    assert "Today is 2023-06-01." in first
    assert "user: I bought a blue car. (said 20 May 2023)" in first
    page = (out / "report.html").read_text()
    assert "LongMemEval" in page and "judge accuracy by question type" in page


def test_judge_free_run_and_resume(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run = LongMemEvalRun(FIX, out, ["recent"], instances=2)
    m = run_longmemeval(run, llm=ScriptedLLM(default=answer), embedder=embedder)["recent"]
    assert m["accuracy"] is None and m["f1"] == pytest.approx((0.4 + 1.0) / 2)
    assert set(questions(out)) == {"q1", "q2_abs"}
    before = (out / "results.jsonl").read_text()
    idle = ScriptedLLM()
    run = LongMemEvalRun(FIX, out, ["recent"], instances=2, resume=True)
    run_longmemeval(run, llm=idle, embedder=embedder, judge=idle)
    assert idle.requests == [] and (out / "results.jsonl").read_text() == before
    page = (out / "report.html").read_text()
    assert "judge accuracy by question type" not in page  # no verdicts: no panel
    assert "token F1 by question type" in page


def test_longmemeval_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def make(spec: str | None = None, **_: object) -> ScriptedLLM:
        return ScriptedLLM(default=judge if spec == "judge" else answer)

    monkeypatch.setattr(deltamem.llm, "make_llm", make)
    out = tmp_path / "o"
    args = ["longmemeval", str(FIX), "--systems", "full", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--judge", "judge", "--judge-mode", "rubric"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["full"]["benchmark"] == "longmemeval" and m["full"]["accuracy"] == 0.75
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0, res.output
    assert "turn recall by question type" in res.output and "| full | 0.750 |" in res.output
    assert "judge accuracy (κ " in res.output  # the QA judge's kappa beside its figure
    assert "judge:qa" in res.output
    one = tmp_path / "one"
    res = CliRunner().invoke(app, [*args[:-1], str(one), "--question", "q3"])
    assert res.exit_code == 0, res.output
    assert set(questions(one)) == {"q3"}
    res = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "x"), "--question", "nope"])
    assert res.exit_code != 0 and "nope" in res.output
