"""`deltamem bench answer`: a run's questions answered again from its log, with
another answerer or fewer hits, without the systems that retrieved them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from typer.testing import CliRunner

from deltamem.bench.cli import app
from deltamem.bench.halumem import HaluMemRun, run_halumem
from deltamem.bench.log import read_records
from deltamem.bench.metrics.locomo import token_f1
from deltamem.bench.reanswer import ReanswerRun, reanswer
from deltamem.bench.rejudge import copy_unjudged
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIX = Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"


def records(out: Path) -> list[dict[str, Any]]:
    return list(read_records(out / "results.jsonl"))


@pytest.fixture
def source(tmp_path: Path, embedder: Embedder) -> Path:
    """A judge-free run of the raw-turn baseline without answers (no model writes)."""
    out = tmp_path / "run"
    run = HaluMemRun(data=FIX, out=out, systems=["retrieval"], answer=False)
    run_halumem(run, llm=ScriptedLLM(), embedder=embedder)
    return out


def york(messages: list[ChatMessage]) -> str:
    return "York." if "York" in messages[-1]["content"] else "Not known from memory."


def test_questions_are_answered_again_from_the_logged_hits(source: Path, tmp_path: Path) -> None:
    before = records(source)
    questions = [r for r in before if r["kind"] == "question"]
    assert questions and all(r["prediction"] is None for r in questions)

    llm = ScriptedLLM(default=york)
    out = tmp_path / "again"
    n = reanswer(ReanswerRun(source=source, out=out, k=2), llm)
    assert n == len(questions) == len(llm.requests)
    after = records(out)
    # every other record is carried over as it was
    assert [r for r in after if r["kind"] != "question"] == [
        r for r in before if r["kind"] != "question"
    ]
    for old, new in zip(questions, [r for r in after if r["kind"] == "question"], strict=True):
        assert new["key"] == old["key"] and "not_answered" not in new
        assert new["prediction"] in {"York.", "Not known from memory."}
        assert new["answered_from"] == min(2, len(old["hits"]))
        assert new["answer_f1"] == token_f1(new["prediction"], str(old["answer"]))
    # the answerer saw only the first k hits, each dated
    prompt = llm.requests[0]["messages"][-1]["content"]
    first = questions[0]
    assert all(h["text"].split(": ", 1)[-1][:40] not in prompt for h in first["hits"][2:])
    assert first["hits"][0]["text"].split(": ", 1)[-1][:40] in prompt

    again = ScriptedLLM()  # asked nothing: every question is there already
    assert reanswer(ReanswerRun(source=source, out=out, k=2, resume=True), again) == 0
    assert again.requests == []
    manifest = json.loads((out / "answered.json").read_text())
    assert manifest["k"] == 2 and manifest["source"] == str(source)


def test_a_run_without_logged_hits_is_refused(source: Path, tmp_path: Path) -> None:
    lines = (source / "results.jsonl").read_text().splitlines()
    old = []
    for line in lines:
        rec = json.loads(line)
        rec.pop("hits", None)
        old.append(json.dumps(rec))
    (source / "results.jsonl").write_text("\n".join(old) + "\n")
    # records without hits are copied, not answered
    assert reanswer(ReanswerRun(source=source, out=tmp_path / "x"), ScriptedLLM()) == 0


def test_bench_answer_command(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deltamem.llm as llm_module

    monkeypatch.setattr(llm_module, "make_llm", lambda *a, **kw: ScriptedLLM(default=york))
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["answer", str(source), "--out", str(out), "--k", "5"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert "retrieval" in json.dumps(metrics)
    assert all(r["prediction"] for r in records(out) if r["kind"] == "question")


def test_bench_judge_command_judges_the_answers_again(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench judge` copies a run's answers and judges every question again into a
    new directory; the answers are untouched, the old verdicts are not reused, and a
    directory that holds a run already is refused."""
    import deltamem.llm as llm_module

    monkeypatch.setattr(llm_module, "make_llm", lambda *a, **kw: ScriptedLLM(default=york))
    answered = tmp_path / "answered"
    res = CliRunner().invoke(app, ["answer", str(source), "--out", str(answered)])
    assert res.exit_code == 0, res.output

    def judge(run: Path, out: Path, reply: str) -> list[dict[str, Any]]:
        monkeypatch.setattr(
            llm_module, "make_llm", lambda *a, **kw: ScriptedLLM(default=lambda m: reply)
        )
        res = CliRunner().invoke(
            app, ["judge", str(run), "--out", str(out), "--data", str(FIX), "--judge", "local"]
        )
        assert res.exit_code == 0, res.output
        return list(read_records(out / "judgments.jsonl"))

    first = judge(answered, tmp_path / "j1", '{"answer": "yes"}')
    questions = [r for r in records(answered) if r["kind"] == "question"]
    assert len(first) == len(questions)
    # what is copied holds no question verdict: every one is judged again
    assert copy_unjudged(tmp_path / "j1", tmp_path / "bare") == len(questions)
    assert not list(read_records(tmp_path / "bare" / "judgments.jsonl"))
    assert (tmp_path / "bare" / "judge_cache.sqlite").is_file()
    again = judge(tmp_path / "j1", tmp_path / "j2", '{"answer": "no"}')
    assert {j["key"] for j in again} == {j["key"] for j in first}
    assert [r["prediction"] for r in records(tmp_path / "j2") if r["kind"] == "question"] == [
        r["prediction"] for r in questions
    ]
    res = CliRunner().invoke(
        app, ["judge", str(answered), "--out", str(tmp_path / "j1"), "--data", str(FIX)]
    )
    assert res.exit_code != 0 and "judge into a new directory" in res.output
    # refused before anything is written: a HaluMem run without its data, no run at all
    for args, why in (
        ([str(answered), "--out", str(tmp_path / "j3")], "--data"),
        ([str(tmp_path), "--out", str(tmp_path / "j3"), "--data", str(FIX)], "no question"),
    ):
        res = CliRunner().invoke(app, ["judge", *args])
        assert res.exit_code != 0 and why in res.output
        assert not (tmp_path / "j3").exists()
