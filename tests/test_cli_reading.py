"""The `deltamem` command line as a newcomer first reads a memory: short ids, the
search table, empty results and the help. No model is called: the bank is written
through the store with named memory ids (so that prefixes are known), the sessions
are logged verbatim; the embedder and SQLite are real."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

from deltamem.cli import render
from deltamem.cli.main import app
from deltamem.cli.render import relevance
from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.retrieval.hybrid import RRF_K
from deltamem.store.base import PlannedWrite

runner = CliRunner()
NO_MODEL = "http://127.0.0.1:9/v1#none"  # never called: nothing here needs the LLM

# two ids that share "ab", one alone under "c0"
FACTS = {
    "ab1f00d1": "Ana lives in Porto.",
    "ab2f00d2": "Ana has a dog named Bolt.",
    "c0ffee00": "Ana plays the violin.",
}


def cli(db: Path, *args: str) -> Result:
    return runner.invoke(app, ["--db", str(db), "--llm", NO_MODEL, *args])


def cli_json(db: Path, *args: str) -> Any:
    res = cli(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(autouse=True)
def wide_tables() -> Iterator[None]:
    """Tables as wide as their rows: at the runner's 80 columns rich folds cells."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(render.out, "width", 200)
        yield


@pytest.fixture
def db(tmp_path: Path, embedder: Embedder) -> Path:
    path = tmp_path / "x.db"
    with Memory(path, llm=NO_MODEL, embedder=embedder) as mem:
        said = [
            {"role": "user", "content": "I moved to Porto last spring with my dog Bolt."},
            {"role": "assistant", "content": "Porto is lovely!"},
        ]
        rec = mem.log_session(said, user_id="ana", session_id="s1", infer=False)
        writes = [
            PlannedWrite("add", text, mem.embedder.embed_one(text), memory_id=mid, turns=[0])
            for mid, text in FACTS.items()
        ]
        mem.store.apply_session(rec, writes, [])
        later = [{"role": "user", "content": "Remind me about the violin."}]
        mem.log_session(later, user_id="ana", session_id="s2", infer=False)
    return path


# --- short ids ----------------------------------------------------------------------
def test_history_and_delete_take_a_unique_prefix_of_the_id(db: Path) -> None:
    listed = cli(db, "memories", "--user", "ana")
    assert listed.exit_code == 0 and "ab1f00d1" in listed.stdout
    rows = cli_json(db, "history", "ab1")
    assert [(r["memory_id"], r["op"]) for r in rows] == [("ab1f00d1", "add")]
    assert cli_json(db, "history", "ab1f00d1") == rows  # the whole id still works

    res = cli(db, "delete", "c0")
    assert res.exit_code == 0, res.output
    assert "deleted c0ffee00: Ana plays the violin." in res.stdout
    assert "c0ffee00" not in {m["id"] for m in cli_json(db, "memories", "--user", "ana")}
    # a deleted memory's history is still reached by its prefix; it cannot be deleted again
    assert [r["op"] for r in cli_json(db, "history", "c0")] == ["add", "delete"]
    again = cli(db, "delete", "c0")
    assert again.exit_code == 1 and "no memory 'c0'" in again.stderr


def test_an_ambiguous_prefix_names_the_candidates_and_changes_nothing(db: Path) -> None:
    for command in ("history", "delete"):
        res = cli(db, command, "ab")
        assert res.exit_code == 2, res.output
        err = " ".join(res.stderr.split())
        assert "memory id 'ab' is ambiguous" in err
        assert "ab1f00d1 Ana lives in Porto." in err and "ab2f00d2 Ana has a dog" in err
        assert "c0ffee00" not in err
    assert len(cli_json(db, "memories", "--user", "ana")) == 3


def test_an_unknown_prefix_is_an_error(db: Path) -> None:
    for command in ("history", "delete"):
        res = cli(db, command, "zz")
        assert res.exit_code == 1 and "no memory 'zz'" in res.stderr


# --- the search table -----------------------------------------------------------------
def test_relevance_reads_the_fused_score_out_of_100() -> None:
    assert relevance(2 / (RRF_K + 1)) == 100  # first in both rankings
    assert relevance(1 / (RRF_K + 1)) == 50  # first in one ranking only
    assert relevance(0.0) == 0


def test_search_table_shows_rank_relevance_and_kind(db: Path) -> None:
    res = cli(db, "search", "Ana lives in Porto.", "--user", "ana", "-k", "4")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = next(line for line in lines if "relevance" in line)
    assert re.search(r"#.*relevance.*kind.*id.*memory", header)
    rows = [line for line in lines if re.match(r"[│|]?\s*\d+\s*[│|]", line)]
    assert len(rows) == 4
    # the fact whose sentence is the query is first in both rankings
    assert re.search(r"1\s*[│|]\s*100 █{10}\s*[│|]\s*fact\s*[│|]\s*ab1f00d1", rows[0]), rows[0]
    assert any("episode" in r and "user: I moved to Porto" in r for r in rows)
    assert "0.03" not in res.stdout  # no raw fused score
    scores = [int(m) for r in rows for m in re.findall(r"[│|]\s*(\d+) [█·]+", r)]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 100 for s in scores)
    hits = cli_json(db, "search", "Ana lives in Porto.", "--user", "ana", "-k", "4")
    assert hits[0]["kind"] == "fact" and 0 < hits[0]["score"] < 1  # JSON keeps the score


# --- empty results --------------------------------------------------------------------
def test_empty_results_say_so_in_a_sentence(db: Path) -> None:
    cases = [
        (["memories", "--user", "nobody"], "no memories for user 'nobody'"),
        (["memories", "--user", "ana", "--type", "event"], "no memories for user 'ana' that match"),
        (["search", "Porto", "--user", "nobody"], "nothing found for user 'nobody'"),
        (["sessions", "--status", "failed"], "no failed sessions"),
        (["sessions", "--user", "nobody"], "no sessions for user 'nobody'"),
    ]
    for args, sentence in cases:
        res = cli(db, *args)
        assert res.exit_code == 0, res.output
        assert res.stdout.strip() == sentence, args
    assert cli_json(db, "memories", "--user", "nobody") == []  # JSON stays a list


def test_sessions_status_takes_deferred(db: Path) -> None:
    deferred = cli_json(db, "sessions", "--status", "deferred")
    assert [(r["session_id"], r["status"]) for r in deferred] == [("s2", "deferred")]
    assert "deferred" in " ".join(cli(db, "sessions", "--help").stdout.split())
    bad = cli(db, "sessions", "--status", "done")
    assert bad.exit_code == 2 and "'done' is not one of" in " ".join(bad.stderr.split())


# --- help -------------------------------------------------------------------------------
def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_option_and_argument_has_help() -> None:
    root = typer.main.get_command(app)
    walked = dict(_commands(root))
    if importlib.util.find_spec("scipy") is not None:  # bench and train need the extra
        assert ("bench",) in walked and ("train",) in walked
    missing = [
        f"{' '.join(path) or 'deltamem'} {p.opts[0] if p.opts else p.name}"
        for path, cmd in walked.items()
        for p in cmd.params
        if not (getattr(p, "help", None) or "").strip()
    ]
    assert missing == []


def test_help_cites_no_document_outside_the_repository() -> None:
    root = typer.main.get_command(app)
    texts = [
        (" ".join(path), text)
        for path, cmd in _commands(root)
        for text in [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
    ]
    assert [(where, t) for where, t in texts if "SPEC" in t or "§" in t] == []
