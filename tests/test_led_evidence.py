"""benchmarks/led_evidence.py: the evidence read with each number of leading facts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fakes import SESSION, ScriptedLLM, add, locomo_conversation, ops

from deltamem.bench.datasets import locomo as lc
from deltamem.memory import Memory

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "led_evidence.py"

TURNS = [
    ("Ann", "We adopted a beagle puppy last spring and called him Rufus."),
    ("Bob", "Work has been hectic, I barely sleep before deadlines."),
    ("Ann", "I finally repainted the kitchen a pale green."),
    ("Bob", "My sister is visiting from Porto next month."),
]
CONVERSATION = locomo_conversation([("1:56 pm on 8 May, 2023", TURNS)])
# the raw search does not reach the dog's turn for this question; the one fact does
QUESTION = "Who is visiting from Porto next month?"


def record(key: str, **fields: object) -> str:
    return json.dumps({"key": key, "system": "deltamem", "user": "c1", **fields}) + "\n"


def test_each_count_of_leading_facts_against_the_default(
    tmp_path: Path, make_memory: Callable[..., Memory]
) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([CONVERSATION]))
    run = tmp_path / "run"
    bank = run / "systems" / "deltamem"
    bank.mkdir(parents=True)
    conv = lc.load(data)[0]
    session = lc.to_bench_session(conv, conv.sessions[0], both_as_user=True)
    llm = ScriptedLLM()
    mem = Memory(bank / "deltamem.db", llm=llm, config=SESSION, log_calls=False)
    llm.push(ops(add("Ann has a dog named Rufus.")))
    mem.add(session.messages, user_id="c1", session_id=session.session_id, timestamp="2023-05-08")
    [fact] = mem.get_all(user_id="c1")
    assert [session.turn_ids[t] for t in fact.turns] == ["D1:1"]
    mem.close()
    (run / "results.jsonl").write_text(
        record("deltamem|c1|session|1", kind="session", session=1)
        + record(
            "deltamem|c1|qa|0", kind="question", category=1, question=QUESTION, evidence=["D1:1"]
        )
        + record(
            "deltamem|c1|qa|1", kind="question", category=5, question=QUESTION, evidence=["D1:1"]
        )  # category 5: not headline
    )
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(run),
            "--data",
            str(data),
            "--limit",
            "2",
            "--facts",
            "0,1",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| run |")]
    # no fact leading: the two raw turns, without the evidence; one fact (the default
    # at limit 2): its turn read beside them
    assert rows == [
        "| run | 0 | 1 | 0.000 | 2.0 | -1.000 (-1.000 … -1.000) |",
        "| run | 1 | 1 | 1.000 | 3.0 |  |",
    ]
