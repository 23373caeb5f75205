"""The PersonaMem runner on a tiny fixture in the release's schema (two shared
contexts, one read by two questions at different end indices), with a scripted
model; its cut points and accuracy by type worked out by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.choice import PROMPTS as CHOICE_PROMPTS
from deltamem.bench.cli import app
from deltamem.bench.datasets import personamem as ds
from deltamem.bench.log import read_records
from deltamem.bench.personamem import PersonaMemRun, by_context, cut_points, run_personamem
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIX = Path(__file__).parent / "fixtures"
QUESTIONS = FIX / "personamem_questions.csv"
CONTEXTS = FIX / "personamem_contexts.jsonl"
CHOICE_SYSTEM = (CHOICE_PROMPTS / "choice.system.txt").read_text(encoding="utf-8").strip()

# pq1 right (b), pq2 wrong (a; the answer is c), pq3 right (a)
PICKS = {
    "Can you suggest a weekend activity for me?": "b",
    "What should I spend Saturday on?": "a",
    "Can you suggest a snack?": "a",
}


def reply(messages: list[ChatMessage]) -> Any:
    assert messages[0]["content"] == CHOICE_SYSTEM
    question = re.search(r"Question: (.*)\n", messages[-1]["content"]).group(1)  # type: ignore[union-attr]
    return {"answer": PICKS[question]}


def records(out: Path) -> list[dict[str, Any]]:
    return list(read_records(out / "results.jsonl"))


def questions(out: Path, system: str = "full") -> dict[str, dict[str, Any]]:
    return {
        r["question_id"]: r
        for r in records(out)
        if r["kind"] == "question" and r["system"] == system
    }


def test_cut_points_by_hand() -> None:
    raw = ds.load_contexts(CONTEXTS)["ctx1"]  # system messages at 0 and 5
    assert cut_points(raw, {3, 7}, 20) == [(0, 4), (4, 5), (5, 8)]
    assert cut_points(raw, {3, 7}, 2) == [(0, 2), (2, 4), (4, 5), (5, 7), (7, 8)]
    assert cut_points(raw, {3}, 20) == [(0, 4)]  # nothing after the last question
    assert cut_points(raw, {99}, 20) == [(0, 5), (5, 9)]  # an end past the context: all of it
    assert cut_points(raw, set(), 20) == []


def test_questions_and_choices() -> None:
    qs = ds.load_questions(QUESTIONS)
    groups = by_context(qs)
    assert list(groups) == ["ctx1", "ctx2"]
    assert [q.question_id for q in groups["ctx1"]] == ["pq1", "pq2"]
    pq2 = groups["ctx1"][1]
    assert pq2.choices == {
        "a": "A ceramics class.",
        "b": "A football match.",
        "c": "Painting watercolours, since you've moved on from ceramics.",
        "d": "A rave.",
    }
    assert pq2.correct_letter == "c" and pq2.model_extra == {"topic": "hobbies"}
    bare = ds.PMQuestion.model_validate(
        pq2.model_dump() | {"all_options": '["yes", "no"]', "topic": "x"}
    )
    assert bare.choices == {"a": "yes", "b": "no"}


def test_end_to_end(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    llm = ScriptedLLM(default=reply)
    m = run_personamem(PersonaMemRun(QUESTIONS, CONTEXTS, out, ["full"]), llm=llm,
                       embedder=embedder)["full"]  # fmt: skip
    sessions = [r for r in records(out) if r["kind"] == "session"]
    # each context is ingested once, cut at system messages and question ends
    assert [(r["user"], r["start"], r["stop"]) for r in sessions] == [
        ("pm:ctx1", 0, 4),
        ("pm:ctx1", 4, 5),
        ("pm:ctx1", 5, 8),
        ("pm:ctx2", 0, 3),
    ]
    assert [r["messages"] for r in sessions] == [3, 1, 2, 2]  # system turns left out
    qs = questions(out)
    # each question saw the context up to its end index, and nothing after it
    assert not any("Later message" in t or "watercolours" in t for t in qs["pq1"]["retrieved"])
    assert any("watercolours" in t for t in qs["pq2"]["retrieved"])
    assert not any("Nothing after" in t for t in qs["pq2"]["retrieved"])
    assert [qs[q]["correct"] for q in ("pq1", "pq2", "pq3")] == [True, False, True]
    assert m["accuracy"] == pytest.approx(2 / 3) and m["n"] == 3 and m["errors"] == 0
    assert m["by_type"] == {
        "recall_user_shared_facts": {"n": 1, "accuracy": 1.0},
        "acknowledge_latest_user_preferences": {"n": 1, "accuracy": 0.0},
        "provide_preference_aligned_recommendations": {"n": 1, "accuracy": 1.0},
    }
    assert m["by_topic"] == {
        "hobbies": {"n": 2, "accuracy": 0.5},
        "food": {"n": 1, "accuracy": 1.0},
    }
    asks = llm.requests
    assert len(asks) == 3
    assert asks[0]["schema"]["properties"]["answer"]["enum"] == ["a", "b", "c", "d"]
    assert "(b) Visit a pottery studio" in asks[0]["messages"][-1]["content"]
    page = (out / "report.html").read_text()
    assert "PersonaMem" in page and "Accuracy by question type" in page


def test_limits_and_resume(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run = PersonaMemRun(QUESTIONS, CONTEXTS, out, ["full", "recent"], shared_contexts=1)
    run_personamem(run, llm=ScriptedLLM(default=reply), embedder=embedder)
    assert set(questions(out)) == {"pq1", "pq2"} and set(questions(out, "recent")) == {"pq1", "pq2"}
    before = (out / "results.jsonl").read_text()
    idle = ScriptedLLM()
    run = PersonaMemRun(QUESTIONS, CONTEXTS, out, ["full", "recent"], shared_contexts=1,
                        resume=True)  # fmt: skip
    run_personamem(run, llm=idle, embedder=embedder)
    assert idle.requests == [] and (out / "results.jsonl").read_text() == before
    run = PersonaMemRun(QUESTIONS, CONTEXTS, tmp_path / "one", ["full"], limit=1)
    m = run_personamem(run, llm=ScriptedLLM(default=reply), embedder=embedder)
    assert m["full"]["n"] == 1


def test_a_context_missing_from_the_file_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    contexts = tmp_path / "c.jsonl"
    contexts.write_text(CONTEXTS.read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="ctx2"):
        run_personamem(
            PersonaMemRun(QUESTIONS, contexts, tmp_path / "o", ["full"]),
            llm=ScriptedLLM(default=reply),
            embedder=embedder,
        )


def test_personamem_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default=reply))
    out = tmp_path / "o"
    args = ["personamem", str(QUESTIONS), str(CONTEXTS), "--systems", "full,retrieval"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--chunk", "2"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert set(m) == {"full", "retrieval"} and m["full"]["benchmark"] == "personamem"
    assert m["full"]["accuracy"] == pytest.approx(2 / 3)
    assert sum(r["kind"] == "session" and r["system"] == "full" for r in records(out)) == 5 + 2
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--chunk", "2", "--resume"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0, res.output
    assert "accuracy by question type" in res.output and "| full | 0.667 |" in res.output
    assert "recall_user_shared_facts" in res.output
