"""Training records from a HaluMem file: adds, updates of the quoted memory, the
state carried from session to session."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from deltamem.cli.main import app
from deltamem.train.records import find_original, records_from_halumem

STAMP = "[Sep 06, 2025, 13:56:51][Persona Memory]"
JOB = "Sarah Garcia's job title is manager"


def point(content: str, update: bool = False, originals: list[str] | None = None) -> dict:
    return {
        "memory_content": content,
        "memory_type": "Persona Memory",
        "memory_source": "primary",
        "is_update": "True" if update else "False",
        "original_memories": originals or [],
    }


def write_user(path: Path) -> None:
    sessions = [
        {
            "start_time": "Sep 06, 2025, 13:56:51",
            "dialogue": [
                {"role": "user", "content": "I'm a manager at Oracle and I live in Miami."},
                {"role": "assistant", "content": "Nice!"},
            ],
            "memory_points": [
                point("Sarah Garcia's job title is manager"),
                point("Sarah Garcia lives in Miami"),
                {**point("Sarah Garcia likes jazz"), "memory_source": "interference"},
            ],
        },
        {
            "start_time": "Oct 05, 2025, 10:00:00",
            "dialogue": [{"role": "user", "content": "I got promoted to senior manager!"}],
            "memory_points": [
                point(
                    "Sarah Garcia is now a senior manager at Oracle.",
                    update=True,
                    originals=[STAMP + JOB],
                ),
                point(
                    "Sarah Garcia earns more.", update=True, originals=["Sarah Garcia owns a boat"]
                ),
            ],
        },
    ]
    path.write_text(json.dumps({"uuid": "u1", "sessions": sessions}) + "\n")


def test_records_carry_the_state_and_resolve_updates(tmp_path: Path) -> None:
    data = tmp_path / "h.jsonl"
    write_user(data)
    first, second = records_from_halumem(data)
    assert first.state_before == [] and [o.op for o in first.ops] == ["add", "add"]
    # the distractor (the assistant's, never confirmed) is not an operation
    assert first.state_after == [
        "Sarah Garcia's job title is manager",
        "Sarah Garcia lives in Miami",
    ]
    assert first.ops[1].keywords and "miami" in first.ops[1].keywords
    assert second.state_before == first.state_after
    promo, unknown = second.ops
    assert promo.op == "update" and promo.replaces == "Sarah Garcia's job title is manager"
    assert unknown.op == "update" and unknown.unmatched and unknown.replaces is None
    assert second.state_after == [
        "Sarah Garcia lives in Miami",
        "Sarah Garcia is now a senior manager at Oracle.",
        "Sarah Garcia earns more.",
    ]
    assert second.messages[0]["role"] == "user" and second.session_id == "s001"


def test_find_original_by_text_then_by_words() -> None:
    state = ["Ana lives in Porto.", "Ana's monthly income is 15600 yuan"]
    assert find_original("[Persona]Ana lives in Porto.", state) == 0
    assert find_original("Ana's monthly income: 15600 yuan", state) == 1
    assert find_original("Ana has a boat", state) is None


def test_cli_writes_records(tmp_path: Path) -> None:
    data, out = tmp_path / "h.jsonl", tmp_path / "r.jsonl"
    write_user(data)
    res = CliRunner().invoke(
        app, ["train", "records", str(data), "--out", str(out), "--sessions", "1"]
    )
    assert res.exit_code == 0, res.output
    [rec] = [json.loads(x) for x in out.read_text().splitlines()]
    assert rec["session"] == 0 and len(rec["ops"]) == 2
