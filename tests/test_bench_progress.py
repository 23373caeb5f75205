"""The bench's progress bars have their totals (issue 40): each bar is given its
total before it first advances and ends at it, in every runner (for all its
systems, and again on --resume), the judges, `bench answer`, `bench judge` and
judge agreement; recorded through the progress object, not read off a terminal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes import RecordedBars, ScriptedLLM
from test_bench_agreement import LABELS
from test_bench_agreement import judge as agreement_judge
from test_bench_halumem import FIX, make_llm
from test_bench_judges import LOCOMO_FIX, judge_reply, locomo_answer, rubric
from test_bench_task import TRIVIA, trivia_file
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench import cli_after_run, cli_runs
from deltamem.bench.agreement import load_labels, run_agreement
from deltamem.bench.cli import app
from deltamem.bench.judges.halumem import JUDGMENTS
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.systems.turns import RecentSystem
from deltamem.bench.task import Models, RunSpec, Task, get_task
from deltamem.cli.render import progress_bars
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIXTURES = Path(__file__).parent / "fixtures"

# the scripted model answers with whole operation lists
pytestmark = pytest.mark.usefixtures("session_strategy")


def kinds(out: Path, kind: str) -> int:
    return sum(r.get("kind") == kind for r in read_records(out / RESULTS))


def test_halumem_bars_fresh_judged_and_resumed(tmp_path: Path, embedder: Embedder) -> None:
    task = get_task("halumem")
    bars = RecordedBars()
    spec = RunSpec(
        data=[FIX],
        out=tmp_path,
        systems=["deltamem", "retrieval"],
        judge_mode="rubric",
        progress=bars,
    )
    judge = ScriptedLLM(default=judge_reply)
    task.run(spec, Models(llm=make_llm(), embedder=embedder, judge=judge))
    bars.assert_ended()
    assert set(bars.totals) == {
        "sessions",
        "updates",
        "questions",
        "judge point",
        "judge extracted",
        "judge update",
        "judge question",
    }
    # two systems: user 1's 3 sessions and user 2's 1, each; what was logged, counted ahead
    assert bars.totals["sessions"] == kinds(tmp_path, "session") == 8
    assert bars.totals["updates"] == kinds(tmp_path, "update") == 2
    assert bars.totals["questions"] == kinds(tmp_path, "question") == 8
    verdicts = sum(1 for _ in read_records(tmp_path / JUDGMENTS))
    assert sum(n for what, n in bars.totals.items() if what.startswith("judge ")) == verdicts

    # resumed: the items found done advance the same bars to the same totals
    again = RecordedBars()
    resumed = dataclasses.replace(spec, resume=True, progress=again)
    task.run(resumed, Models(llm=make_llm(), embedder=embedder, judge=judge))
    again.assert_ended()
    assert again.totals == {w: bars.totals[w] for w in ("sessions", "updates", "questions")}


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[RecordedBars]:
    """The bars of each `deltamem bench` command invoked, in order."""
    made: list[RecordedBars] = []

    @contextmanager
    def bars(totals: Mapping[str, int] | None = None) -> Iterator[RecordedBars]:
        made.append(RecordedBars())
        yield made[-1]

    monkeypatch.setattr(cli_runs, "progress_bars", bars)
    monkeypatch.setattr(cli_after_run, "progress_bars", bars)

    def reply(messages: list[ChatMessage]) -> Any:
        if messages[0]["content"] == rubric("locomo"):
            return judge_reply(messages)
        return locomo_answer(messages)

    monkeypatch.setattr(deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default=reply))
    return made


def test_locomo_run_answer_and_judge_commands(tmp_path: Path, recorded: list[RecordedBars]) -> None:
    run, answered, judged = tmp_path / "run", tmp_path / "answered", tmp_path / "judged"
    systems = ["--systems", "recent,retrieval", "--llm", "x"]
    commands = [
        ["locomo", str(LOCOMO_FIX), *systems, "--no-answers", "--out", str(run)],
        ["locomo", str(LOCOMO_FIX), *systems, "--no-answers", "--resume", "--out", str(run)],
        ["answer", str(run), "--out", str(answered), "--llm", "x", "--judge", "x"],
        ["judge", str(answered), "--out", str(judged), "--judge", "x"],
    ]
    for args in commands:
        res = CliRunner().invoke(app, [*args, "--judge-mode", "rubric"])
        assert res.exit_code == 0, res.output
    for bars in recorded:
        bars.assert_ended()
    write, resumed, answer, judge = recorded
    assert write.totals == resumed.totals
    assert write.totals == {
        "sessions": kinds(run, "session"),
        "questions": kinds(run, "question"),
    }
    # every question answered again, and judged but the adversarial ones
    adversarial = sum(r.get("category") == 5 for r in read_records(run / RESULTS))
    assert answer.totals == {
        "questions": kinds(run, "question"),
        "judged": kinds(run, "question") - adversarial,
    }
    assert judge.totals == {"judged": answer.totals["judged"]}


def named_recent(name: str, work: Path) -> RecentSystem:
    system = RecentSystem()
    system.name = name  # two systems of one kind, apart in the log
    return system


Setup = Callable[[Path], tuple[Task, list[Path], dict[str, Any]]]
SETUPS: dict[str, Setup] = {
    "membench": lambda tmp: (
        get_task("membench"),
        [FIXTURES / "membench_tiny.json"],
        {"noise": 1},
    ),
    "longmemeval": lambda tmp: (get_task("longmemeval"), [FIXTURES / "longmemeval_tiny.json"], {}),
    "personamem": lambda tmp: (
        get_task("personamem"),
        [FIXTURES / "personamem_questions.csv", FIXTURES / "personamem_contexts.jsonl"],
        {"chunk": 2},
    ),
    "qa task": lambda tmp: (TRIVIA, [trivia_file(tmp)], {}),
}


@pytest.mark.parametrize("name", SETUPS)
def test_each_runner_counts_its_bars_ahead(tmp_path: Path, name: str) -> None:
    task, data, options = SETUPS[name](tmp_path)
    out = tmp_path / "out"
    models = Models(llm=ScriptedLLM(default="A"), make=named_recent)
    bars = RecordedBars()
    spec = RunSpec(data=data, out=out, systems=["a", "b"], options=options, progress=bars)
    task.run(spec, models)
    bars.assert_ended()
    sessions = "steps" if name == "membench" else "sessions"
    assert bars.totals == {
        sessions: kinds(out, "session"),
        "questions": kinds(out, "question"),
    }
    assert all(n > 0 and n % 2 == 0 for n in bars.totals.values())  # both systems

    again = RecordedBars()
    task.run(dataclasses.replace(spec, resume=True, progress=again), models)
    again.assert_ended()
    assert again.totals == bars.totals


def test_agreement_bars_count_the_labelled_items(tmp_path: Path) -> None:
    bars = RecordedBars()
    llm = ScriptedLLM(default=agreement_judge)
    run_agreement(
        LABELS, llm, data=FIXTURES, out=tmp_path, mode="rubric", split="all", progress=bars
    )
    bars.assert_ended()
    labels = load_labels(LABELS)
    assert bars.totals == {f"agreement {name}": len(items) for name, items in labels.items()}


def test_bars_off_a_terminal_print_once_at_their_final_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with progress_bars({"personas": 2, "nothing to do": 0}) as bars:
        bars.advance("personas", 2)
        bars.total("sessions", 3)
        for _ in range(3):
            bars.advance("sessions")
        bars.advance("open-ended", 4)  # no total: drawn as n/?
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 3  # a line per bar, drawn once; none for a phase of no items
    assert lines[0].startswith("personas") and lines[0].endswith("2/2")
    assert lines[1].startswith("sessions") and lines[1].endswith("3/3")
    assert lines[2].startswith("open-ended") and lines[2].endswith("4/?")
