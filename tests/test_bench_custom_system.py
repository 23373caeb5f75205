"""A system from outside the package, plugged into the harness: the runnable example
(examples/custom_system.py, no model at all), the same class named on the command
line as package.module:ClassName, and the errors a bad name gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from fakes import ScriptedLLM
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.cli import app
from deltamem.bench.cli_options import system_names
from deltamem.bench.systems.factory import SystemSpecError, system_class

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_system.py"
DATA = ROOT / "examples" / "data" / "tiny_locomo.json"
SPEC = "examples.custom_system:KeywordMemory"


def test_the_example_runs_without_a_model_and_prints_its_metrics(tmp_path: Path) -> None:
    env = os.environ | {"PYTHONPATH": str(ROOT), "DELTAMEM_LLM": "no-such-model"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # the LoCoMo table, with the answer-free figure filled and the answered ones empty
    row = next(line for line in done.stdout.splitlines() if line.startswith("| keyword |"))
    assert row.split("|")[2].strip() == "–"  # F1: no answers, no model
    assert "evidence recall" in done.stdout and "single-hop" in done.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["keyword"]["n"] == 4 and metrics["keyword"]["evidence_recall"] == 1.0
    assert (tmp_path / "out" / "report.html").exists()


def test_a_class_named_on_the_command_line_runs_beside_the_built_in_systems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default="?"))
    monkeypatch.syspath_prepend(str(ROOT))
    out = tmp_path / "o"
    args = ["run", "locomo", str(DATA), "--systems", f"{SPEC},recent", "--no-answers"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--k", "3"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {"keyword", "recent"}  # named by the class's `name`
    assert metrics["keyword"]["evidence_recall"] == 1.0
    res = CliRunner().invoke(app, ["tables", str(out)])
    assert res.exit_code == 0 and "| keyword |" in res.output


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_42:Memory", "no module 'no_such_module_42'"),
        ("examples.custom_system:Nothing", "has no 'Nothing'"),
        ("examples.custom_system:words", "is not a MemorySystem"),
        ("deltamem.bench.systems.base:MemorySystem", "does not write _add_session"),
        ("examples.custom_system:", "write it as package.module:Name"),
    ],
)
def test_a_bad_class_name_gets_a_clear_error(
    spec: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    with pytest.raises(SystemSpecError, match="system") as err:
        system_class(spec)
    assert says in str(err.value)
    with pytest.raises(typer.BadParameter) as bad:
        system_names(f"recent,{spec}")
    assert says in str(bad.value)


def test_a_bad_class_name_stops_the_command_before_any_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_model(*_: object, **__: object) -> None:
        raise AssertionError("no model is loaded for a command that cannot run")

    monkeypatch.setattr(deltamem.llm, "make_llm", no_model)
    res = CliRunner().invoke(
        app, ["run", "locomo", str(DATA), "--systems", "nope_42:X", "--out", str(tmp_path)]
    )
    assert res.exit_code == 2
    assert "nope_42" in res.output
