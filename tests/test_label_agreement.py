"""benchmarks/label_agreement.py: the second reader of the rules' labelled cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "label_agreement.py"


def test_two_readers_agreement_is_reported_against_the_first_labels(tmp_path: Path) -> None:
    cases = [
        {"id": "a", "expect": "keep", "fact": "A"},
        {"id": "b", "expect": "refuse", "fact": "B", "relabelled": {"was": "keep"}},
        {"id": "c", "expect": "refuse", "fact": "C"},
        {"id": "d", "expect": "keep", "fact": "D"},
        # entered only because both of the audit's readers agreed: not counted here
        {"id": "e", "expect": "keep", "fact": "E", "source": "fact audit of 2026-11-29"},
    ]
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    (tmp_path / "second.tsv").write_text(
        "a\tkeep\t-\tsaid\nb\trefuse\t4\ta thank-you\nc\trefuse\t1\tthe friend's\nd\trefuse\t3\tx\n"
        "e\tkeep\t-\tsaid\n"
    )
    args = ["--cases", str(tmp_path / "cases.jsonl"), "--second", str(tmp_path / "second.tsv")]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # first labels: keep keep refuse keep against keep refuse refuse refuse -> 2 of 4
    assert "against the first labels: 2/4 agree (0.500)" in out
    assert "against the labels now: 3/4 agree (0.750)" in out
    assert "relabelled under the policy: 1 (b)" in out
    assert "1 cases of the fact audit left out" in out
    assert "  d keep / refuse (3)" in out


def test_every_labelled_case_has_a_second_reading() -> None:
    ids = [
        json.loads(line)["id"]
        for line in (ROOT / "deltamem" / "rules" / "cases.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    second = (ROOT / "benchmarks" / "data" / "rules_second_reader.tsv").read_text("utf-8")
    read = {line.split("\t")[0] for line in second.splitlines() if line.strip()}
    assert set(ids) <= read
