"""benchmarks/qa_readers.py: two blind readers against the HaluMem QA labels and judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "qa_readers.py"


def _item(qid: str, label: str, split: str) -> dict[str, object]:
    inputs = {"question": "q", "answer": "a", "evidence": [], "prediction": f"said {qid}"}
    return {"id": qid, "judge": "qa", "label": label, "split": split, "inputs": inputs}


def test_labels_and_judge_are_read_against_the_agreed_items(tmp_path: Path) -> None:
    labels = [
        _item("qa-001", "correct", "test"),
        _item("qa-002", "hallucination", "tune"),
        _item("qa-090", "hallucination", "test"),  # an embedded answerer's answer
        _item("qa-091", "correct", "tune"),
    ]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(x) for x in labels) + "\n")
    # the readers split on qa-002: it is left out of every comparison
    (tmp_path / "readers.tsv").write_text(
        "qa-001\tcorrect\tcorrect\tsame\nqa-002\tomission\thallucination\tx\n"
        "qa-090\tomission\tomission\tbeside the question\nqa-091\tcorrect\tcorrect\tsame\n"
    )
    verdicts = {"tune": {"qa-002": "correct", "qa-091": "hallucination"}}
    verdicts["test"] = {"qa-001": "correct", "qa-090": "hallucination"}
    for half, judged in verdicts.items():
        folder = tmp_path / "agreement" / f"decomposed-{half}"
        folder.mkdir(parents=True)
        lines = [json.dumps({"id": i, "judge": v}) for i, v in judged.items()]
        lines.append(json.dumps({"id": "locomo-001", "judge": "CORRECT"}))
        (folder / "agreement_items.jsonl").write_text("\n".join(lines) + "\n")
    args = ["--labels", tmp_path, "--readers", tmp_path / "readers.tsv"]
    args += ["--agreement", tmp_path / "agreement"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=True
    ).stdout
    assert "the two readers: 3/4 agree" in out
    assert "all agreed items (3):" in out
    # the judge: right on qa-001, a wrong verdict but the right share on qa-090, qa-091
    # (correct) called hallucination
    assert "0 of 1 not correct called correct, 1 of 2 correct called not" in out
    assert "correct share 0.333 (readers 0.667)" in out
    assert "qa-090 hallucination / readers omission" in out


def test_every_qa_label_has_both_readings() -> None:
    ids = {
        json.loads(line)["id"]
        for line in (ROOT / "bench" / "labels" / "qa.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    }
    rows = (ROOT / "benchmarks" / "data" / "qa_readers.tsv").read_text("utf-8").splitlines()
    read = {r.split("\t")[0]: r.split("\t")[1:3] for r in rows if r.strip()}
    assert set(read) == ids
    allowed = {"correct", "hallucination", "omission"}
    assert all(set(pair) <= allowed for pair in read.values())
