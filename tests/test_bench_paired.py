"""`deltamem bench compare`: two systems' answers paired question by question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deltamem.bench.cli import app
from deltamem.bench.paired import (
    CompareError,
    bootstrap_interval,
    compare_runs,
    markdown,
    mcnemar_exact,
)


def write_run(
    out: Path, records: list[dict[str, Any]], judgments: dict[str, str] | None = None
) -> Path:
    out.mkdir(parents=True)
    with (out / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    if judgments:
        with (out / "judgments.jsonl").open("w", encoding="utf-8") as fh:
            for key, verdict in judgments.items():
                fh.write(json.dumps({"key": key, "fields": {"verdict": verdict}}) + "\n")
    return out


def halumem_q(system: str, i: int, f1: float, prediction: str | None = "an answer") -> dict:
    return {
        "key": f"{system}|u1|0|question|{i}",
        "kind": "question",
        "system": system,
        "question": f"q{i}?",
        "prediction": prediction,
        "answer_f1": f1,
        "evidence_coverage": None,
        "verdict": None,
    }


def test_mcnemar_exact_worked_by_hand() -> None:
    # two discordant questions, both B's: P(X = 0) + P(X = 2) for Binomial(2, 1/2)
    assert mcnemar_exact(2, 0) == pytest.approx(0.5)
    # six, all one system's: 2 / 2**6
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 2) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_bootstrap_interval_of_a_constant_difference_is_that_difference() -> None:
    a, b = np.zeros(10), np.ones(10)
    assert bootstrap_interval(a, b) == (1.0, 1.0)


def test_bootstrap_interval_is_seeded_and_holds_the_difference() -> None:
    a = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 0], dtype=float)
    b = np.array([1, 1, 1, 0, 0, 1, 1, 1, 1, 1], dtype=float)
    low, high = bootstrap_interval(a, b)
    assert (low, high) == bootstrap_interval(a, b)
    assert low < b.mean() - a.mean() < high
    assert low >= -1.0 and high <= 1.0


def test_halumem_runs_pair_by_question_with_the_judges_verdicts(tmp_path: Path) -> None:
    a = write_run(
        tmp_path / "a",
        [halumem_q("deltamem", i, 0.5) for i in range(4)]
        # the facts-only system's records ride along unanswered in a re-answered run
        + [halumem_q("deltamem-facts", i, 0.0, prediction=None) for i in range(4)],
        {f"deltamem|u1|0|question|{i}": v for i, v in enumerate(["correct"] * 3 + ["omission"])},
    )
    b = write_run(
        tmp_path / "b",
        # question 3 was not answered by B: it is left out of every figure
        [halumem_q("retrieval", i, 0.25) for i in range(3)],
        {f"retrieval|u1|0|question|{i}": v for i, v in enumerate(["hallucination", "correct"])},
    )
    result = compare_runs(a, b)
    assert (result["a"]["system"], result["b"]["system"]) == ("deltamem", "retrieval")
    figures = {f["figure"]: f for f in result["figures"]}
    qa = figures["QA correct"]
    # question 2 has no verdict in B, so two questions pair: A right on both, B on one
    assert qa["n"] == 2
    assert (qa["a"], qa["b"], qa["diff"]) == (1.0, 0.5, -0.5)
    assert (qa["b_only"], qa["a_only"]) == (0, 1)
    assert figures["answer F1"]["n"] == 3
    assert figures["answer F1"]["diff"] == pytest.approx(-0.25)
    assert "evidence coverage" not in figures  # no record gives it
    table = markdown(result)
    assert "| QA correct | 2 | 1.000 | 0.500 | -0.500 |" in table


def test_locomo_runs_are_read_by_their_judge_and_f1(tmp_path: Path) -> None:
    def q(system: str, i: int, judge: bool, f1: float, category: int = 1) -> dict:
        return {
            "key": f"{system}|conv-1|qa|{i}",
            "kind": "question",
            "system": system,
            "category": category,
            "prediction": "x",
            "judge": judge,
            "f1": f1,
            "evidence_recall": 1.0,
        }

    run = write_run(
        tmp_path / "r",
        [q("deltamem", i, True, 0.5) for i in range(3)]
        + [q("retrieval", i, i == 0, 0.5) for i in range(3)]
        # adversarial questions are not in LoCoMo's headline figures, nor here
        + [q(s, 9, False, 0.0, category=5) for s in ("deltamem", "retrieval")],
    )
    with pytest.raises(CompareError, match="name the system"):
        compare_runs(run, run)
    result = compare_runs(run, run, "retrieval", "deltamem")
    assert result["benchmark"] == "locomo"
    judge = result["figures"][0]
    assert (judge["figure"], judge["n"], judge["b_only"], judge["a_only"]) == ("judge", 3, 2, 0)
    assert judge["p_value"] == pytest.approx(0.5)
    with pytest.raises(CompareError, match="no question of system 'mem0'"):
        compare_runs(run, run, "mem0", "deltamem")


def test_compare_command(tmp_path: Path) -> None:
    a = write_run(
        tmp_path / "a", [halumem_q("deltamem", 0, 1.0)], {"deltamem|u1|0|question|0": "correct"}
    )
    b = write_run(
        tmp_path / "b", [halumem_q("retrieval", 0, 0.0)], {"retrieval|u1|0|question|0": "omission"}
    )
    res = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert res.exit_code == 0, res.output
    assert "| QA correct | 1 | 1.000 | 0.000 | -1.000 |" in res.output
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--json"])
    assert json.loads(res.output)["figures"][0]["a_only"] == 1
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--systems", "deltamem"])
    assert res.exit_code != 0
    assert "two names" in res.output


def test_two_users_pool_their_questions(tmp_path: Path) -> None:
    def run(name: str, system: str, user: str, verdicts: list[str]) -> Path:
        recs = [
            halumem_q(system, i, 0.5) | {"key": f"{system}|{user}|0|question|{i}"}
            for i in range(len(verdicts))
        ]
        judged = {f"{system}|{user}|0|question|{i}": v for i, v in enumerate(verdicts)}
        return write_run(tmp_path / name, recs, judged)

    a0 = run("a0", "deltamem", "u0", ["correct", "correct"])
    b0 = run("b0", "retrieval", "u0", ["correct", "omission"])
    a3 = run("a3", "deltamem", "u3", ["omission", "correct", "correct"])
    b3 = run("b3", "retrieval", "u3", ["correct", "correct", "omission"])
    result = compare_runs([a0, a3], [b0, b3])
    qa = result["figures"][0]
    # question 0 of both users has the same index: the user in the key keeps them apart
    assert (qa["n"], qa["b_only"], qa["a_only"]) == (5, 1, 2)
    assert result["a"]["runs"] == [str(a0), str(a3)]
    res = CliRunner().invoke(app, ["compare", str(a0), str(b0), str(a3), str(b3)])
    assert res.exit_code == 0, res.output
    assert "| QA correct | 5 | 0.800 | 0.600 | -0.200 |" in res.output
    res = CliRunner().invoke(app, ["compare", str(a0), str(b0), str(a3)])
    assert res.exit_code != 0
    assert "in pairs" in res.output
    with pytest.raises(CompareError, match="share no question"):
        compare_runs([a0], [b3])


def test_halumem_sessions_pair_by_their_state_f1(tmp_path: Path) -> None:
    """A write-path change compared on HaluMem: each evaluated session's memory-state F1
    beside the same session's in the other run; filler sessions and sessions one run
    lacks are left out."""

    def session(system: str, i: int, r_trans: float | None, filler: bool = False) -> dict:
        state = None if r_trans is None else {"r_trans": r_trans}
        return {
            "key": f"{system}|u1|{i}|session",
            "kind": "session",
            "system": system,
            "filler": filler,
            "state": state,
        }

    a = write_run(
        tmp_path / "a",
        [halumem_q("deltamem", 0, 0.5)]
        + [session("deltamem", i, 0.2) for i in range(3)]
        + [session("deltamem", 3, None, filler=True)],
    )
    b = write_run(
        tmp_path / "b",
        [halumem_q("deltamem-floor", 0, 0.5)]
        + [session("deltamem-floor", i, 0.3) for i in range(2)]
        + [session("deltamem-floor", 3, None, filler=True), session("deltamem-floor", 4, 0.9)],
    )
    result = compare_runs(a, b, "deltamem", "deltamem-floor")
    state = {f["figure"]: f for f in result["figures"]}["state F1 (a session)"]
    assert (state["n"], state["a"], state["b"]) == (2, 0.2, 0.3)
    assert state["diff"] == pytest.approx(0.1)
    assert state["low"] == pytest.approx(0.1) and state["high"] == pytest.approx(0.1)
    assert "| state F1 (a session) | 2 | 0.200 | 0.300 | +0.100 |" in markdown(result)
