"""benchmarks/fact_audit.py: two blind readers of a random draw of stored facts."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")  # the script's intervals; in the bench and train extras

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "fact_audit.py"
AUDIT = ROOT / "benchmarks" / "data" / "fact_audit"


def _script(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def audit():
    return _script("fact_audit", SCRIPT)


def _bank(run: Path, facts: int) -> None:
    """A bench run's bank: one session of two turns, `facts` facts from the second."""
    db_dir = run / "systems" / "deltamem"
    db_dir.mkdir(parents=True)
    db = sqlite3.connect(db_dir / "deltamem.db")
    db.execute(
        "CREATE TABLE memories (id TEXT, user_id TEXT, content TEXT, session_id TEXT, "
        "turns TEXT, timestamp TEXT, invalid_at TEXT, superseded_by TEXT, expires_at TEXT)"
    )
    db.execute(
        "CREATE TABLE episodes (user_id TEXT, session_id TEXT, turn INT, role TEXT, "
        "name TEXT, content TEXT)"
    )
    db.executemany(
        "INSERT INTO episodes VALUES ('u', 's1', ?, 'user', ?, ?)",
        [(0, "Ana", "Do you still cook?"), (1, "Ben", "Every day, I love it.")],
    )
    rows = [
        (f"m{i}", "u", f"Ben cooks {i}", "s1", "[1]", "2023-05-08T10:00:00", None, None, None)
        for i in range(facts)
    ]
    day = "2023-05-08"
    rows += [
        ("gone", "u", "Ben cooked once", "s1", "[1]", day, "2023-06-01", None, None),
        ("old", "u", "Ben bakes", "s1", "[1]", day, None, "m0", None),
        ("past", "u", "Ben fasts", "s1", "[1]", day, None, None, "2023-06-01T00:00:00+00:00"),
    ]
    db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()


def test_the_draw_shows_the_source_turns_and_the_message_before(
    audit,
    tmp_path: Path,
) -> None:
    _bank(tmp_path / "run-a", facts=3)
    audit.draw([tmp_path / "run-a"], per_bank=3, seed=1, out=tmp_path / "out")
    blind = [json.loads(line) for line in (tmp_path / "out" / "facts_blind.jsonl").open()]
    key = [json.loads(line) for line in (tmp_path / "out" / "key.jsonl").open()]
    assert len(blind) == len(key) == 3
    # all three current facts, never the ended, the superseded or the expired one
    assert {f["fact"] for f in blind} == {"Ben cooks 0", "Ben cooks 1", "Ben cooks 2"}
    assert blind[0]["turns"] == [
        {"speaker": "Ana", "text": "Do you still cook?", "source": False},
        {"speaker": "Ben", "text": "Every day, I love it.", "source": True},
    ]
    assert "bank" not in blind[0] and key[0]["bank"] == "run-a"


def test_the_report_counts_what_both_and_either_reader_call_wrong(
    audit,
    tmp_path: Path,
    capsys,
) -> None:
    key = [{"id": f"a{i}", "bank": "b1" if i < 2 else "b2", "fact": "F"} for i in range(4)]
    (tmp_path / "key.jsonl").write_text("".join(json.dumps(k) + "\n" for k in key))
    (tmp_path / "reader_a.tsv").write_text(
        "a0\twrong\t1\tthe friend's\na1\twrong\t3\tadded\na2\tright\t0\tsaid\na3\tright\t0\tok\n"
    )
    (tmp_path / "reader_b.tsv").write_text(
        "a0\twrong\t1\tthe friend's\na1\tright\t0\tfine\na2\tright\t0\tsaid\na3\tright\t0\tok\n"
    )
    got = audit.report(tmp_path)
    assert got == {"facts": 4, "agree": 3, "both": 1, "either": 2}
    out = capsys.readouterr().out
    assert "| b1 | 2 | 1 | 2 |" in out and "| b2 | 2 | 0 | 0 |" in out


def test_a_label_outside_the_policy_is_an_error(audit, tmp_path: Path) -> None:
    for bad in (
        "a0\twrong\t0\tno point\n",
        "a0\tRight\t0\tx\n",
        "a0\tright\t0\tx\na0\twrong\t1\ty\n",
    ):
        (tmp_path / "r.tsv").write_text(bad)
        with pytest.raises(SystemExit):
            audit.read_labels(tmp_path / "r.tsv")


def test_the_committed_audit_is_read_by_both_readers(audit) -> None:
    key = [json.loads(line) for line in (AUDIT / "key.jsonl").open(encoding="utf-8")]
    for reader in ("reader_a.tsv", "reader_b.tsv"):
        labels = audit.read_labels(AUDIT / reader)
        assert set(labels) == {k["id"] for k in key}
        for label, point, _ in labels.values():
            assert (label, point) == ("right", "0") or (label == "wrong" and point in set("123456"))
    # the figures docs/results.md gives (section 9)
    assert audit.report(AUDIT) == {"facts": 240, "agree": 219, "both": 62, "either": 83}


@pytest.fixture(scope="module")
def confidence():
    return _script("extract_confidence", ROOT / "benchmarks" / "extract_confidence.py")


def test_the_confidence_report_finds_audited_facts_and_scores_them(confidence, tmp_path) -> None:
    """benchmarks/extract_confidence.py `report`: each agreed audited fact is found
    among the facts written again by its words, the AUC is of right above wrong, and a
    floor counts what it would refuse."""
    labels = confidence._labels()
    keys = [json.loads(line) for line in (AUDIT / "key.jsonl").open()]
    right = [k for k in keys if labels.get(k["id"]) == "right" and k["bank"].startswith("lc26")][:2]
    wrong = [k for k in keys if labels.get(k["id"]) == "wrong" and k["bank"].startswith("lc26")][:2]
    lines = [
        # reworded a little (a full stop, another case), the same content words
        {"id": k["id"], "bank": k["bank"], "turn": 1, "kept": [[k["fact"].upper() + ".", c]]}
        for k, c in zip([*right, *wrong], [-0.1, -0.7, -0.65, -0.9], strict=True)
    ]
    lines.append({"id": keys[0]["id"], "bank": "lc26-s10", "turn": 2, "kept": [["Nobody", -5.0]]})
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = confidence.report(path)
    assert out["found"] == 4
    assert out["groups"]["all"] == {"right": 2, "wrong": 2, "auc": 0.75}  # -0.7 < -0.65
    assert out["floors"]["-0.6"] == {"wrong": 2, "right": 1}
    assert out["floors"]["-0.8"] == {"wrong": 1, "right": 0}
