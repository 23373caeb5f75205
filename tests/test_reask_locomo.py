"""benchmarks/reask_locomo.py: a finished LoCoMo run made ready to be asked again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reask_locomo.py"


def records() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for system in ("deltamem", "retrieval"):
        out.append({"key": f"{system}|c|session|1", "kind": "session", "system": system})
        for i, cat in enumerate((1, 4, 5)):
            out.append({"key": f"{system}|c|qa|{i}", "kind": "question", "system": system,
                        "category": cat, "prediction": "old"})  # fmt: skip
        out.append({"key": f"{system}|c|done|1", "kind": "user_done", "system": system})
    return out


def test_the_systems_questions_and_done_mark_go_the_rest_stays(tmp_path: Path) -> None:
    answered, bank, out = tmp_path / "ans", tmp_path / "bank", tmp_path / "out"
    answered.mkdir()
    (answered / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    (answered / "judge_cache.sqlite").write_bytes(b"cache")
    (bank / "systems" / "deltamem").mkdir(parents=True)
    (bank / "systems" / "deltamem" / "deltamem.db").write_bytes(b"bank")
    run = [sys.executable, str(SCRIPT), str(answered), "--bank", str(bank), "--out", str(out)]
    done = subprocess.run(run, capture_output=True, text=True, check=True)
    assert "2 deltamem questions to ask again" in done.stdout
    kept = [json.loads(line)["key"] for line in (out / "results.jsonl").open()]
    # deltamem's category 1-4 questions and its done mark go; its sessions, its
    # category-5 question and every retrieval record stay
    assert kept == [
        "deltamem|c|session|1",
        "deltamem|c|qa|2",
        "retrieval|c|session|1",
        "retrieval|c|qa|0",
        "retrieval|c|qa|1",
        "retrieval|c|qa|2",
        "retrieval|c|done|1",
    ]
    assert (out / "systems" / "deltamem" / "deltamem.db").read_bytes() == b"bank"
    assert (out / "judge_cache.sqlite").read_bytes() == b"cache"
    # a second call would overwrite a run half asked: it refuses
    again = subprocess.run(run, capture_output=True, text=True)
    assert again.returncode != 0 and "exists" in again.stderr
