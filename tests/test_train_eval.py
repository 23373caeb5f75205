"""`deltamem train eval`: the GRPO reward measured through the product's own call,
on a split of sessions that training never sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from typer.testing import CliRunner

from deltamem.cli.main import app
from deltamem.embed import Embedder
from deltamem.train.evaluate import evaluate
from deltamem.train.grpo import load_records, turn_examples
from deltamem.train.records import (
    TrainingRecord,
    held_out,
    select,
)

FIXTURE = Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"


def record(user: str, session_id: str) -> TrainingRecord:
    return TrainingRecord(user, 0, session_id, None, [], [])


def test_the_split_is_a_stable_partition_of_sessions() -> None:
    recs = [record(f"u{u}", f"s{s}") for u in range(10) for s in range(30)]
    heldout, train = select(recs, "heldout"), select(recs, "train")
    assert {id(r) for r in heldout}.isdisjoint(id(r) for r in train)
    assert len(heldout) + len(train) == len(recs) == len(select(recs, "all"))
    assert 0.1 < len(heldout) / len(recs) < 0.3  # about the default share, 0.2
    # the same session is held out whatever the file order and length
    assert select(list(reversed(recs)), "heldout")[::-1] == heldout
    assert held_out(record("u3", "s7")) == held_out(record("u3", "s7"))
    assert select(recs, "heldout", share=1.0) == recs


def test_each_turn_is_scored_with_the_reward_and_a_rerun_resumes(
    records_file: Path, embedder: Embedder, tmp_path: Path
) -> None:
    examples = turn_examples(load_records(records_file)).examples
    # the gold facts of each turn, as the model would write them
    llm = ScriptedLLM([{"facts": e.gold} for e in examples])
    out = tmp_path / "eval.jsonl"
    summary = evaluate(records_file, llm, out, embed=embedder.embed, split="all")
    assert summary.examples == len(examples) == len(llm.requests)
    assert summary.failed == 0 and summary.format == 1.0
    assert summary.reward == pytest.approx(1.0)  # every turn: its gold exactly
    # the product's call: the extractor's messages, schema and reply cap
    assert llm.requests[0]["messages"] == examples[0].prompt
    assert llm.requests[0]["schema"]["properties"]["facts"]["maxItems"] == 6
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["source"] for r in rows] == [e.source for e in examples]

    again = ScriptedLLM()  # would fail if asked anything
    resumed = evaluate(records_file, again, out, embed=embedder.embed, split="all")
    assert again.requests == [] and resumed.reward == summary.reward


def test_a_wrong_or_failed_reply_scores_low(
    records_file: Path, embedder: Embedder, tmp_path: Path
) -> None:
    examples = turn_examples(load_records(records_file)).examples
    stated = next(i for i, e in enumerate(examples) if e.gold)
    # the turn with gold gets garbage twice (the LLM layer asks once more, then fails)
    replies: list[Any] = [{"facts": []} for _ in examples]
    replies[stated : stated + 1] = ["not json at all", "still not json"]
    llm = ScriptedLLM(replies)
    out = tmp_path / "eval.jsonl"
    summary = evaluate(records_file, llm, out, embed=embedder.embed, split="all")
    rows = {r["source"]: r for r in map(json.loads, out.read_text().splitlines())}
    failed = rows[examples[stated].source]
    assert failed["reward"] == 0.0 and failed["error"]
    assert summary.failed == 1
    # "no facts" is right for a turn without gold, wrong for one with it
    empty = [e for e in examples if not e.gold]
    assert all(rows[e.source]["r_trans"] == 1.0 for e in empty)
    assert summary.reward < 0.9


def test_train_eval_runs_on_the_real_engine(records_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.jsonl"
    res = CliRunner().invoke(
        app,
        [
            "--llm",
            "tiny",
            "train",
            "eval",
            "--records",
            str(records_file),
            "--split",
            "all",
            "--limit",
            "2",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["examples"] == 2 and summary["failed"] == 0
    assert 0.0 <= summary["reward"] <= 1.0
    assert len(out.read_text().splitlines()) == 2
