"""benchmarks/evidence_at_k.py: raw search given as many turns as deltamem read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fakes import locomo_conversation

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "evidence_at_k.py"

CONVERSATION = locomo_conversation(
    [
        (
            "1:56 pm on 8 May, 2023",
            [
                ("Ann", "I adopted a grey cat called Miso."),
                ("Bob", "Lovely! I am learning the cello."),
            ],
        ),
        (
            "3:00 pm on 9 May, 2023",
            [
                ("Ann", "Miso knocked over my coffee today."),
                ("Bob", "My cello teacher moved to Lyon."),
            ],
        ),
        # not added by the run: never ranked
        ("3:00 pm on 10 May, 2023", [("Ann", "My cat Miso is ill.")]),
    ]
)


def record(key: str, **fields: object) -> str:
    return json.dumps({"key": key, "system": "deltamem", "user": "c1", **fields}) + "\n"


def test_recall_at_every_k_and_at_the_count_deltamem_read(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([CONVERSATION]))
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(
        record("deltamem|c1|session|1", kind="session", session=1)
        + record("deltamem|c1|session|2", kind="session", session=2)
        # read one turn and found one of the two evidence turns
        + record(
            "deltamem|c1|qa|0",
            kind="question",
            category=1,
            question="What is Ann's cat?",
            evidence=["D1:1", "D2:1"],
            reached=["D1:1"],
            evidence_recall=0.5,
        )
        # category 5 is not a headline question
        + record(
            "deltamem|c1|qa|1",
            kind="question",
            category=5,
            question="x?",
            evidence=["D1:2"],
            reached=[],
            evidence_recall=0.0,
        )
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(run), "--data", str(data), "--k", "0,4"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 questions; `deltamem` read 1.0 items")
    assert "its evidence recall 0.500" in lines[0]
    # k 0 reaches nothing; k 4 is every turn of the two sessions added
    assert "| 0 | 0.000 | +0.500 |" in done.stdout
    assert "| 4 | 1.000 | -0.500 |" in done.stdout
    # one turn, ranked by cosine: the cat turns rank above the cello ones
    assert "| as many as `deltamem` read | 0.500 | +0.000 |" in done.stdout


def test_halumem_coverage_of_the_turns_held_when_asked(tmp_path: Path) -> None:
    user = {
        "uuid": "u1",
        "persona_info": "Name: Ann Lee; Age: 30",
        "sessions": [
            {"dialogue": [{"role": "user", "content": "I work as a nurse in Leeds."},
                          {"role": "assistant", "content": "Nursing is demanding work."}]},
            {"dialogue": [{"role": "user", "content": "I moved to a clinic in York."}]},
            # after the question: never ranked
            {"dialogue": [{"role": "user", "content": "Now I teach nursing in Hull."}]},
        ],
    }  # fmt: skip
    data = tmp_path / "halumem.jsonl"
    data.write_text(json.dumps(user) + "\n")
    run = tmp_path / "run"
    run.mkdir()
    question = {"kind": "question", "system": "deltamem", "user": "u1", "session": 1,
                "question": "Where does Ann work?", "evidence": ["Ann Lee works in York"],
                "hits": [{"text": "x"}], "evidence_coverage": 0.5}  # fmt: skip
    (run / "results.jsonl").write_text(json.dumps(question) + "\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(run), "--data", str(data), "--k", "0,3"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "its evidence coverage 0.500" in done.stdout
    # "work" and "york" (the name is left out): none at k 0, both among the three turns
    assert "| 0 | 0.000 | +0.500 |" in done.stdout
    assert "| 3 | 1.000 | -0.500 |" in done.stdout
