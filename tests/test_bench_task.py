"""One task shape: the registry, `deltamem bench run TASK DATA` (the short commands
are the same code), the task's own options, a new benchmark written as a loader
and a scorer (`QATask`), and the judge's kappa beside every judged figure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from test_bench_judges import LOCOMO_FIX, locomo_answer
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench import kappa
from deltamem.bench.cli import app
from deltamem.bench.datasets import BenchSession
from deltamem.bench.datasets.base import message
from deltamem.bench.markdown import run_tables
from deltamem.bench.qa_task import QATask, Question, Score, Unit
from deltamem.bench.render import Table, markdown
from deltamem.bench.systems.turns import RecentSystem
from deltamem.bench.task import TASKS, Models, RunSpec, Task, TaskError, get_task

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default=locomo_answer)
    )


def test_every_registered_task_loads_and_checks_its_files(tmp_path: Path) -> None:
    for name in TASKS:
        task = get_task(name)
        assert isinstance(task, Task) and task.name == name and task.title
        files = [tmp_path / f"f{i}" for i in range(len(task.data))]
        task.check(RunSpec(data=files, out=tmp_path, systems=["recent"]))
        with pytest.raises(TaskError, match="reads"):
            task.check(RunSpec(data=[*files, tmp_path], out=tmp_path, systems=["recent"]))
    with pytest.raises(TaskError, match="unknown task"):
        get_task("nope")
    with pytest.raises(TaskError, match="not a Task"):
        get_task("deltamem.bench.task:RunSpec")


def test_bench_run_and_the_short_command_are_the_same_run(tmp_path: Path, scripted: None) -> None:
    common = ["--systems", "recent", "--llm", "loc", "--conversations", "1"]
    res = CliRunner().invoke(
        app, ["locomo", str(LOCOMO_FIX), *common, "--out", str(tmp_path / "a")]
    )
    assert res.exit_code == 0, res.output
    common[-2] = "--limit"  # the task's units: LoCoMo's conversations
    res = CliRunner().invoke(
        app, ["run", "locomo", str(LOCOMO_FIX), *common, "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 0, res.output

    def figures(out: Path) -> dict[str, Any]:
        m = json.loads((out / "metrics.json").read_text())["recent"]
        return {k: m[k] for k in ("f1", "bleu1", "evidence_recall", "n", "by_category")}

    assert figures(tmp_path / "a") == figures(tmp_path / "b")


def test_a_tasks_own_options_and_the_options_it_does_not_take(
    tmp_path: Path, scripted: None
) -> None:
    base = ["run", "locomo", str(LOCOMO_FIX), "--out", str(tmp_path)]
    res = CliRunner().invoke(
        app, [*base, "--set", "sessions=1", "--set", "both-as-user=yes", "--check"]
    )
    assert res.exit_code == 0, res.output
    assert "1 units" in res.output and "--set sessions=1" in res.output
    assert "--set both_as_user=True" in res.output
    for bad, says in (
        (["--set", "session=1"], "sessions"),  # lists the options it has
        (["--set", "sessions=many"], "not a number"),
        (["--only", "conv-x"], "no conversation conv-x"),
    ):
        res = CliRunner().invoke(app, [*base, *bad, "--check"])
        assert res.exit_code == 2 and says in res.output
    membench = FIXTURES / "membench_tiny.json"
    res = CliRunner().invoke(
        app, ["run", "membench", str(membench), "--only", "x", "--out", str(tmp_path)]
    )
    assert res.exit_code == 2 and "takes no --only" in res.output
    res = CliRunner().invoke(app, ["run", "membench", str(membench), "--check", "--limit", "2"])
    assert res.exit_code == 0 and "2 units" in res.output


# --- a new benchmark: a loader and a scorer ---------------------------------------------
class TinyTrivia(QATask):
    """Users tell a fact in one session each; a question asks it back."""

    name = "trivia"
    title = "Trivia"
    data = ("trivia.json",)

    def units(self, data: Path) -> Iterable[Unit]:
        for row in json.loads(data.read_text()):
            when = datetime(2024, 1, 1)
            sessions = [
                BenchSession(
                    session_id=f"s{i}",
                    timestamp=when,
                    messages=[message("user", text, when)],
                    turn_ids=[f"s{i}:0"],
                )
                for i, text in enumerate(row["said"])
            ]
            q = Question(
                row["id"],
                row["question"],
                answer=row["answer"],
                evidence=row["evidence"],
                fields={"group": row["topic"]},
            )
            yield Unit(row["user"], sessions, [q])

    def score(self, q: Question, prediction: str | None, retrieved: list[str]) -> dict[str, Score]:
        said = any((q.answer or "").lower() in r.lower() for r in retrieved)
        exact = None if prediction is None else (q.answer or "").lower() in prediction.lower()
        return {"exact": exact, "answer_retrieved": said}


TRIVIA = TinyTrivia()


def trivia_file(tmp_path: Path) -> Path:
    rows = [
        {"user": "u1", "id": "q1", "topic": "places", "said": ["I moved to Lisbon.", "I like tea."],
         "question": "Where did I move?", "answer": "Lisbon", "evidence": ["s0:0"]},
        {"user": "u2", "id": "q2", "topic": "pets", "said": ["My cat is Miso.", "It rained."],
         "question": "What is my cat called?", "answer": "Miso", "evidence": ["s0:0"]},
    ]  # fmt: skip
    path = tmp_path / "trivia.json"
    path.write_text(json.dumps(rows))
    return path


def test_a_new_benchmark_is_a_loader_and_a_scorer(tmp_path: Path) -> None:
    data, out = trivia_file(tmp_path), tmp_path / "out"
    llm = ScriptedLLM(default="It is Lisbon.")
    spec = RunSpec(data=[data], out=out, systems=["recent"], k=1)
    metrics = TRIVIA.run(spec, Models(llm=llm, make=lambda name, work: RecentSystem()))
    m = metrics["recent"]
    assert m["benchmark"] == "trivia" and m["n"] == 2
    assert m["exact"] == 0.5  # the scripted answer is right for u1 only
    assert m["answer_retrieved"] == 0.0 and m["evidence_recall"] == 0.0  # k=1: the last turn
    assert m["by_group"]["places"]["exact"] == 1.0
    # resumable: a second run adds nothing
    lines = (out / "results.jsonl").read_text().count("\n")
    TRIVIA.run(
        RunSpec(data=[data], out=out, systems=["recent"], k=1, resume=True),
        Models(llm=llm, make=lambda n, w: RecentSystem()),
    )
    assert (out / "results.jsonl").read_text().count("\n") == lines
    # and its page, from the generic one, in `bench tables` and report.html
    tables = run_tables(out)
    assert "| recent |" in tables and "exact" in tables and "by group" in tables
    assert "trivia" in (out / "report.html").read_text()


def test_a_new_benchmark_runs_from_the_command_line_by_its_module_path(
    tmp_path: Path, scripted: None
) -> None:
    data = trivia_file(tmp_path)
    args = ["run", "test_bench_task:TRIVIA", str(data), "--systems", "recent"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--no-answers"])
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())["recent"]
    assert m["exact"] is None and m["evidence_recall"] == 1.0  # k=10: every turn


# --- kappa beside judged figures ----------------------------------------------------------
def test_the_kappa_snapshot_is_the_committed_agreement() -> None:
    assert kappa.AGREEMENT.exists()
    assert kappa.agreement() == kappa.SNAPSHOT


def test_judged_columns_carry_their_judges_kappa_and_the_note_says_what_it_is() -> None:
    ks = kappa.agreement().kappa
    table = Table(
        ["system", "accuracy", "state F1"],
        [["a", 0.5, 0.6]],
        judged={"accuracy": ("accuracy",)},
    )
    page = markdown([table])
    flag = " < 0.6" if (ks["accuracy"] or 1) < kappa.BAR else ""
    assert f"accuracy (κ {ks['accuracy']:.3f}{flag})" in page
    assert "state F1 |" in page  # a judge-free figure has none
    before = "before the judges dropped the product's rules"
    assert (before in page) is not kappa.agreement().own_rules
    # one judge behind every figure of a titled table: the title carries it once
    one = Table(
        ["system", "correct", "n"], [["a", 0.5, 3]], title="QA", judged={"correct": ("qa",)}
    )
    assert f"QA (κ {ks['qa']:.3f}" in markdown([one])
