"""`deltamem bench` sub-app: argument handling and a full run with a scripted LLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import ScriptedLLM
from test_bench_halumem import FIX, scripted_reply
from test_bench_judges import LOCOMO_FIX, judge_reply, locomo_answer
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.cli import app
from deltamem.bench.log import RunDirBusy, exclusive_run

# the scripted model answers with whole operation lists
pytestmark = pytest.mark.usefixtures("session_strategy")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_make_llm(spec: str | None = None, **_: object) -> ScriptedLLM:
        if spec == "judge":
            return ScriptedLLM(default=judge_reply)
        if spec == "loc":
            return ScriptedLLM(default=locomo_answer)
        return ScriptedLLM(default=scripted_reply)

    monkeypatch.setattr(deltamem.llm, "make_llm", fake_make_llm)


def test_halumem_command(tmp_path: Path, scripted: None) -> None:
    out = tmp_path / "o"
    args = [
        "halumem",
        str(FIX),
        "--systems",
        "deltamem,recent",
        "--out",
        str(out),
        "--users",
        "1",
        "--judge",
        "judge",
        # judge_reply scripts the rubric prompts ("auto" picks decomposed checks for
        # a model that is not hosted)
        "--judge-mode",
        "rubric",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert set(m) == {"deltamem", "recent"}
    assert m["deltamem"]["qa"]["correct"] is not None
    assert m["deltamem"]["extraction"]["recall"] == pytest.approx(0.5)
    # raw turns are not extracted memories: no accuracy verdicts for `recent`
    assert m["recent"]["extraction"]["recall"] is not None
    assert m["recent"]["extraction"]["accuracy"] is None
    assert m["recent"]["extraction"]["target_precision"] is None
    judged = [json.loads(x)["key"] for x in (out / "judgments.jsonl").read_text().splitlines()]
    assert not [k for k in judged if k.startswith("recent|") and "|extracted|" in k]
    assert [k for k in judged if k.startswith("deltamem|") and "|extracted|" in k]
    # every call of the run is logged, and summed per purpose
    calls = [json.loads(x) for x in (out / "llm_calls.jsonl").read_text().splitlines()]
    purposes = {c["purpose"] for c in calls}
    assert "manager" in purposes and "answer" in purposes
    assert any(p.startswith("judge:") for p in purposes)
    # with the model's raw reply: the manager's proposals as it wrote them
    manager = [c for c in calls if c["purpose"] == "manager"]
    assert all("operations" in json.loads(c["reply"]) for c in manager)
    usage = json.loads((out / "llm_usage.json").read_text())
    assert usage["manager"]["calls"] == sum(c["purpose"] == "manager" for c in calls)
    assert 0.0 <= usage["manager"]["cached_share"] <= 1.0
    res = CliRunner().invoke(app, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0, res.output
    assert "| deltamem | 0.500 |" in res.output  # recall, as in metrics.json
    assert "| recent |" in res.output and "judge:qa" in res.output


def test_locomo_command(tmp_path: Path, scripted: None) -> None:
    out = tmp_path / "l"
    res = CliRunner().invoke(
        app, ["locomo", str(LOCOMO_FIX), "--systems", "full", "--out", str(out), "--llm", "loc"]
    )
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["full"]["judge"] is None and m["full"]["f1"] > 0
    assert "by category" in (out / "report.html").read_text()
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0, res.output
    assert "F1, judge and evidence recall by category" in res.output and "| full |" in res.output
    # the judged figure carries its judge's kappa, and the page says what that is
    assert "LLM judge (κ " in res.output and "Cohen's κ" in res.output


def test_locomo_picks_conversations_by_sample_id(tmp_path: Path, scripted: None) -> None:
    base = ["locomo", str(LOCOMO_FIX), "--systems", "recent", "--llm", "loc"]
    res = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a"), "--conversation", "tiny-1"])
    assert res.exit_code == 0, res.output
    records = (tmp_path / "a" / "results.jsonl").read_text()
    assert "tiny-1" in records
    res = CliRunner().invoke(
        app, [*base, "--out", str(tmp_path / "b"), "--conversation", "conv-99"]
    )
    assert res.exit_code != 0
    assert "conv-99" in str(res.exception) + res.output


def test_unknown_system_is_refused(tmp_path: Path, scripted: None) -> None:
    res = CliRunner().invoke(
        app, ["halumem", str(FIX), "--systems", "nope", "--out", str(tmp_path)]
    )
    assert res.exit_code != 0
    assert "unknown system" in res.output


def _hold_run_dir(out: Path) -> subprocess.Popen[bytes]:
    """Another process that holds OUT as a bench run does, until killed."""
    code = (
        "import sys, time; from pathlib import Path\n"
        "from deltamem.bench.log import exclusive_run\n"
        "with exclusive_run(Path(sys.argv[1])):\n"
        "    print('held', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    return proc


def test_a_second_run_on_a_busy_run_dir_is_refused_and_writes_nothing(
    tmp_path: Path, scripted: None
) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "results.jsonl").write_text('{"key": "someone else\'s item"}\n')
    holder = _hold_run_dir(out)
    try:
        with pytest.raises(RunDirBusy, match=f"pid {holder.pid}"), exclusive_run(out):
            pass
        # without --resume a run starts results.jsonl afresh: it must not get that far
        res = CliRunner().invoke(
            app, ["halumem", str(FIX), "--systems", "recent", "--out", str(out), "--users", "1"]
        )
        assert res.exit_code == 2
        assert "in use by another bench run" in " ".join(res.output.split())
        assert (out / "results.jsonl").read_text() == '{"key": "someone else\'s item"}\n'
        assert not (out / "metrics.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # the lock dies with its process, however it ends
    res = CliRunner().invoke(
        app, ["halumem", str(FIX), "--systems", "recent", "--out", str(out), "--users", "1"]
    )
    assert res.exit_code == 0, res.output
    assert (out / "metrics.json").exists()


def test_rescore_computes_the_state_distance_again(tmp_path: Path, scripted: None) -> None:
    run = tmp_path / "o"
    args = ["halumem", str(FIX), "--systems", "deltamem", "--out", str(run), "--users", "1"]
    assert CliRunner().invoke(app, args).exit_code == 0
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    sessions = [r for r in records if r["kind"] == "session" and "gold" in r]
    assert sessions
    logged = {r["key"]: r["state"]["r_trans"] for r in sessions}
    # a run scored by an older distance: its logged states are stale
    for r in sessions:
        r["state"]["r_trans"] = 0.123
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["rescore", str(run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"{len(sessions)} sessions scored again, {len(sessions)} moved" in res.output
    again = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["key"]: r["state"]["r_trans"] for r in again if r["key"] in logged} == pytest.approx(
        logged
    )
    assert len(again) == len(records)  # every other record carried over
    state_f1 = json.loads((out / "metrics.json").read_text())["deltamem"]["extraction"]["state_f1"]
    assert state_f1 == pytest.approx(sum(logged.values()) / len(logged))
    # never over a run already there
    res = CliRunner().invoke(app, ["rescore", str(run), "--out", str(out)])
    assert res.exit_code != 0 and "exists" in res.output
    # a run without HaluMem sessions: a clear error, and no directory left behind
    empty = tmp_path / "e"
    empty.mkdir()
    (empty / "results.jsonl").write_text(json.dumps({"kind": "question", "key": "q"}) + "\n")
    res = CliRunner().invoke(app, ["rescore", str(empty), "--out", str(tmp_path / "n")])
    assert res.exit_code != 0 and "no session" in res.output
    assert not (tmp_path / "n").exists()
