"""`deltamem diff`: the state distance between two memory states, by hand-worked
numbers (fixed vectors) and through the CLI on snapshots and a real store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes import SESSION, ScriptedLLM, add, ops
from typer.testing import CliRunner

from deltamem.cli.main import app
from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.train.diff import SnapshotError, diff_states, load_snapshot

VEC = {
    "Ana lives in Porto.": [1.0, 0.0, 0.0],
    "Ana lives in Lisbon.": [0.96, 0.28, 0.0],  # cosine 0.96 with Porto
    "Ana has a cat.": [0.0, 1.0, 0.0],
    "Ana plays chess.": [0.0, 0.0, 1.0],
    "Ana works as a nurse.": [0.6, 0.6, 0.53],  # below τ with everything
}


def embed(texts: list[str]) -> np.ndarray:
    return np.array([VEC[t] for t in texts])


def test_hand_worked_diff() -> None:
    pred = ["Ana has a cat.", "Ana lives in Lisbon.", "Ana works as a nurse."]
    target = ["Ana has a cat.", "Ana lives in Porto.", "Ana plays chess."]
    d = diff_states(pred, target, embed=embed, tau=0.75)
    assert d.shared == ["Ana has a cat."]
    # Lisbon pairs with Porto (0.96 ≥ τ) but earns only the keywords it keeps:
    # gold keywords of "Ana lives in Porto." are Ana, Porto, lives -> 2 of 3
    [m] = d.matched
    assert (m.pred, m.target) == ("Ana lives in Lisbon.", "Ana lives in Porto.")
    assert m.similarity == pytest.approx(0.96)
    assert m.fidelity == pytest.approx(2 / 3)
    assert d.missing == ["Ana plays chess."] and d.extra == ["Ana works as a nurse."]
    credit = 1 + 2 / 3
    assert d.precision == pytest.approx(credit / 3, abs=1e-6)
    assert d.recall == pytest.approx(credit / 3, abs=1e-6)
    assert d.f1 == pytest.approx(credit / 3, abs=1e-6)


def test_equal_and_empty_states() -> None:
    same = ["Ana has a cat.", "Ana plays chess."]
    assert diff_states(same, list(reversed(same)), embed=embed).f1 == pytest.approx(1.0)
    assert diff_states([], [], embed=embed).f1 == 1.0
    gone = diff_states([], same, embed=embed)
    assert gone.recall == 0.0 and gone.missing == same


def test_snapshots(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps([{"id": "m1", "content": "Ana has a cat."}, "Ana plays chess."]))
    assert load_snapshot(a) == ["Ana has a cat.", "Ana plays chess."]
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"memories": ["x"]}))
    assert load_snapshot(b) == ["x"]
    for bad in ("{", '{"memories": 3}', "[1]"):
        b.write_text(bad)
        with pytest.raises(SnapshotError):
            load_snapshot(b)


def test_cli_compares_a_store_with_a_snapshot(tmp_path: Path, embedder: Embedder) -> None:
    db = tmp_path / "m.db"
    llm = ScriptedLLM(default=ops(add("Ana has a cat named Miso.")))
    mem = Memory(db, llm=llm, embedder=embedder, config=SESSION)
    mem.add([{"role": "user", "content": "My cat is called Miso."}], user_id="ana")
    mem.close()
    target = tmp_path / "t.json"
    target.write_text(json.dumps(["Ana has a cat named Miso.", "Ana lives in Porto."]))
    runner = CliRunner()
    res = runner.invoke(app, ["--db", str(db), "diff", "ana", str(target), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["shared"] == ["Ana has a cat named Miso."] and got["missing"] == [
        "Ana lives in Porto."
    ]
    assert got["precision"] == pytest.approx(1.0) and got["recall"] == pytest.approx(0.5)
    # STORE::USER names the store explicitly; --min-f1 fails a regression check
    res = runner.invoke(app, ["diff", f"{db}::ana", str(target), "--min-f1", "0.9"])
    assert res.exit_code == 1 and "below --min-f1" in res.output
    assert "missing" in res.output and "Ana lives in Porto." in res.output
    res = runner.invoke(app, ["diff", f"{tmp_path / 'nope.db'}::ana", str(target)])
    assert res.exit_code == 2 and "no store" in res.output
