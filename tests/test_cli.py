"""The `deltamem` command line with the real engine (`--llm tiny`: SmolLM2-135M, whose
answers are useless but schema-constrained) on a real SQLite file. Real-model `add`
calls are few; sessions that must not cost a model call have no user turn."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from deltamem.cli.main import app
from deltamem.cli.sessions_file import SessionFileError, read_sessions
from deltamem.memory import Memory

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def cli(db: Path, *args: str, llm: str = "tiny") -> Result:
    return runner.invoke(app, ["--db", str(db), "--llm", llm, *args])


def cli_json(db: Path, *args: str) -> Any:
    res = cli(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def session(sid: str, day: int, *messages: dict[str, str], uid: str = "ana") -> dict[str, Any]:
    return {
        "user_id": uid,
        "session_id": sid,
        "timestamp": f"2029-03-{day:02d}T10:00:00",
        "messages": list(messages),
    }


QUIET = (bot("Hello! How can I help today?"),)  # no user turn: applied without the LLM
S1 = session("a1", 1, user("I live in Porto and I have a dog named Bolt."), bot("Lovely!"))
S2 = session("a2", 2, user("I started learning the violin."), bot("Great."))


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def session_rows(db: Path) -> list[dict[str, Any]]:
    return cli_json(db, "sessions")


def live(db: Path, uid: str = "ana") -> list[dict[str, Any]]:
    return cli_json(db, "memories", "--user", uid)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One llama.cpp thread: on a shared 2-core machine two threads that spin-wait on
    each other can slow decoding a hundredfold."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DELTAMEM_THREADS", "1")
        # the 135M model (and the fake servers here) answer with operation lists; its
        # per-turn facts are refused as ungrounded, so the bank would stay empty
        mp.setenv("DELTAMEM_MANAGER", "session")
        yield


# --- a bank built once with the real model ----------------------------------------------
@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    d = tmp_path_factory.mktemp("bank")
    db = d / "x.db"
    results = cli_json(db, "add", str(write_json(d / "sessions.json", [S1, S2])))
    return db, results


def test_add_json_list_applies_every_session(bank: tuple[Path, list[dict[str, Any]]]) -> None:
    db, results = bank
    assert [(r["session_id"], r["status"], r["already_applied"]) for r in results] == [
        ("a1", "applied", False),
        ("a2", "applied", False),
    ]
    assert all(r["cost"]["llm_calls"] == 1 for r in results)
    rows = session_rows(db)
    assert [(r["session_id"], r["status"], r["user_id"]) for r in rows] == [
        ("a1", "applied", "ana"),
        ("a2", "applied", "ana"),
    ]
    adds = [o for r in results for o in r["operations"] if o["op"] == "add"]
    assert len(live(db)) == len(adds)  # the agent never deletes: one live memory per add


def test_add_again_is_idempotent(bank: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    db, first = bank
    before = live(db)
    again = cli_json(db, "add", str(write_json(tmp_path / "again.json", [S1, S2])))
    assert [(r["session_id"], r["already_applied"]) for r in again] == [
        ("a1", True),
        ("a2", True),
    ]
    assert [r["operations"] for r in again] == [r["operations"] for r in first]
    assert live(db) == before
    assert len(session_rows(db)) == 2


def test_memories_search_history(bank: tuple[Path, list[dict[str, Any]]]) -> None:
    db, _ = bank
    items = live(db)
    assert items and all(m["user_id"] == "ana" and m["session_id"] in ("a1", "a2") for m in items)
    assert cli_json(db, "memories", "--user", "nobody") == []
    only_a1 = cli_json(db, "memories", "--user", "ana", "--session", "a1")
    assert {m["session_id"] for m in only_a1} <= {"a1"}
    bad = cli(db, "memories", "--user", "ana", "--since", "not a date")
    assert bad.exit_code == 2 and "error" in bad.stderr

    target = items[0]
    hits = cli_json(db, "search", target["content"], "--user", "ana", "-k", "3")
    assert 1 <= len(hits) <= 3
    assert hits[0]["memory"]["content"] == target["content"]  # its own sentence comes first
    assert cli_json(db, "search", target["content"], "--user", "nobody") == []

    rows = cli_json(db, "history", target["id"])
    assert rows[0]["op"] == "add" and rows[-1]["new_content"] == target["content"]
    assert all(r["memory_id"] == target["id"] for r in rows)
    missing = cli(db, "history", "no-such-id")
    assert missing.exit_code == 1 and "no-such-id" in missing.stderr

    applied = cli_json(db, "sessions", "--status", "applied")
    assert {r["session_id"] for r in applied} == {"a1", "a2"}
    assert "messages" not in applied[0]
    assert cli_json(db, "sessions", "--status", "pending") == []
    assert cli_json(db, "sessions", "--user", "nobody") == []


def test_tables_print_text_not_markup(tmp_path: Path) -> None:
    """Text with square brackets is data, not rich markup (it used to crash the table)."""
    db = tmp_path / "copy.db"
    with Memory(db) as mem:
        # ids cannot hold '/' (deltamem/ids.py), so no closing tags in them; the error can
        rec = mem.log_session([user("hi")], user_id="[b]", session_id="[red]x")
        mem.store.mark_failed(rec.user_id, rec.session_id, None, "boom [/red] here")
    res = cli(db, "sessions")
    assert res.exit_code == 0, res.output
    assert "[red]x" in res.stdout and "[/red]" in res.stdout
    res = cli(db, "delete", "[bold]nope")
    assert res.exit_code == 1 and "[bold]nope" in res.stderr


# --- input formats (one session with a user turn each: one model call each) ---------------
def test_add_jsonl(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    rows = [S1, session("q1", 5, *QUIET), {"session_id": "q2", "messages": list(QUIET)}]
    f = write_jsonl(tmp_path / "s.jsonl", rows)
    f.write_text(f.read_text(encoding="utf-8").replace("\n", "\n\n", 1), encoding="utf-8")
    results = cli_json(db, "add", str(f), "--user", "bob")  # --user fills the one without
    assert [(r["session_id"], r["status"]) for r in results] == [
        ("a1", "applied"),
        ("q1", "applied"),
        ("q2", "applied"),
    ]
    assert [(r["session_id"], r["user_id"]) for r in session_rows(db)] == [
        ("a1", "ana"),
        ("q1", "ana"),
        ("q2", "bob"),
    ]


@pytest.mark.parametrize("shape", ["object", "messages"])
def test_add_single_session_shapes(tmp_path: Path, shape: str) -> None:
    db = tmp_path / "x.db"
    msgs = [user("My sister Mia is a nurse in Lyon."), bot("Nice!")]
    value: Any = {"session_id": "one", "messages": msgs} if shape == "object" else msgs
    res = cli(db, "add", str(write_json(tmp_path / "s.json", value)), "--user", "cy", "--json")
    [r] = json.loads(res.stdout)
    # the shape is under test, not the 135M model: its reply sometimes runs on to the
    # token cap and does not parse, which fails the session (logged, exit 1), as
    # documented for garbage; the session is logged under the right ids either way
    if r["status"] == "failed":
        assert res.exit_code == 1
        assert "did not return a JSON object" in r["error"] or "wrong shape" in r["error"]
    else:
        assert r["status"] == "applied" and not r["already_applied"] and res.exit_code == 0
    [row] = session_rows(db)
    assert row["user_id"] == "cy" and row["status"] == r["status"]
    if shape == "object":
        assert row["session_id"] == "one"
    else:
        assert len(row["session_id"]) == 16  # named by its content


# --- bad files write nothing ------------------------------------------------------------
BAD_FILES: list[tuple[str, str, bytes, str]] = [
    (
        "invalid-json-line",
        "s.jsonl",
        (json.dumps(S1) + "\n" + json.dumps(S2) + "\n{not json\n").encode(),
        r"s\.jsonl:3: invalid JSON",
    ),
    (
        "bad-utf8",
        "s.jsonl",
        (json.dumps(S1) + "\n").encode()
        + b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n',
        r"s\.jsonl:2: not valid UTF-8",
    ),
    (
        "malformed-message",
        "s.json",
        json.dumps([S1, S2, session("a3", 3, {"content": "no role"})]).encode(),
        r"s\.json\[2\]: message 0: role",
    ),
    (
        "malformed-session-jsonl",
        "s.jsonl",
        (json.dumps(S1) + "\n" + json.dumps({"user_id": "ana", "messages": "hi"}) + "\n").encode(),
        r"s\.jsonl:2: messages must be a list",
    ),
    (
        "no-messages-key",
        "s.jsonl",
        (json.dumps(S1) + "\n" + json.dumps({"user_id": "ana"}) + "\n").encode(),
        r"s\.jsonl:2: session has no 'messages'",
    ),
    (
        "bad-timestamp",
        "s.json",
        json.dumps([S1, {**S2, "timestamp": "next Tuesday-ish"}]).encode(),
        r"s\.json\[1\]: .*next Tuesday-ish",
    ),
    (
        "no-user",
        "s.json",
        json.dumps([S1, {"messages": [user("hi")]}]).encode(),
        r"s\.json\[1\]: no user_id",
    ),
    (
        "same-id-twice",
        "s.json",
        json.dumps([S1, {**S2, "session_id": "a1"}]).encode(),
        r"s\.json\[1\]: session 'a1' of user 'ana' is already logged with different content",
    ),
    ("empty", "s.json", b"  \n", r"s\.json: the file is empty"),
]


@pytest.mark.parametrize(
    ("name", "data", "pattern"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES]
)
def test_bad_file_is_reported_and_nothing_is_written(
    tmp_path: Path, name: str, data: bytes, pattern: str
) -> None:
    import re

    db = tmp_path / "x.db"
    f = tmp_path / name
    f.write_bytes(data)
    res = cli(db, "add", str(f), "--json")
    assert res.exit_code == 2
    assert re.search(pattern, res.stderr.replace("\n", "")), res.stderr
    assert res.stdout == ""
    assert session_rows(db) == []


def test_conflict_with_the_log_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    cli_json(db, "add", str(write_json(tmp_path / "q.json", session("q1", 1, *QUIET))))
    changed = session("q1", 1, bot("Something else entirely."))
    f = write_json(tmp_path / "s.json", [session("q0", 2, *QUIET), changed])
    res = cli(db, "add", str(f))
    assert res.exit_code == 2
    assert "s.json[1]: session 'q1'" in res.stderr and "different content" in res.stderr
    assert [r["session_id"] for r in session_rows(db)] == ["q1"]  # q0 was not logged


def test_missing_file(tmp_path: Path) -> None:
    res = cli(tmp_path / "x.db", "add", str(tmp_path / "nope.json"))
    assert res.exit_code == 2 and "nope.json: no such file" in res.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["memories"],
        ["search", "dog"],
        ["replay"],
        ["retry", "s1"],
        ["answer", "Where?"],
    ],
    ids=lambda a: a[0],
)
def test_user_is_required(tmp_path: Path, args: list[str]) -> None:
    res = cli(tmp_path / "x.db", *args)
    assert res.exit_code == 2
    assert "--user" in res.stderr


# --- the log: resume, retry, replay ---------------------------------------------------------
def test_resume_retry_replay(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with Memory(db) as mem:  # logged but never processed, as after a crash
        mem.log_session(S1["messages"], user_id="ana", session_id="a1", timestamp=S1["timestamp"])
        rec = mem.log_session(list(QUIET), user_id="ana", session_id="q1")
        mem.store.mark_failed(rec.user_id, rec.session_id, None, "LLM down")
    assert {r["session_id"]: r["status"] for r in session_rows(db)} == {
        "a1": "pending",
        "q1": "failed",
    }

    resumed = cli_json(db, "resume")
    assert [(r["session_id"], r["status"]) for r in resumed] == [("a1", "applied")]
    assert cli_json(db, "resume") == []  # nothing left pending
    adds = [o for o in resumed[0]["operations"] if o["op"] == "add"]
    assert len(live(db)) == len(adds)

    retried = cli_json(db, "retry", "q1", "--user", "ana")
    assert retried["status"] == "applied" and not retried["already_applied"]
    again = cli_json(db, "retry", "q1", "--user", "ana")
    assert again["already_applied"]
    res = cli(db, "retry", "zz", "--user", "ana")
    assert res.exit_code == 2 and "no session 'zz'" in res.stderr

    replayed = cli_json(db, "replay", "--user", "ana")
    assert [(r["session_id"], r["status"]) for r in replayed] == [
        ("a1", "applied"),
        ("q1", "applied"),
    ]
    assert all(not r["already_applied"] for r in replayed)
    adds = [o for o in replayed[0]["operations"] if o["op"] == "add"]
    assert len(live(db)) == len(adds)  # the old bank is gone, the new one is the replay's


def test_delete(bank: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    src, _ = bank
    db = tmp_path / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{db}{suffix}")
    victim = live(db)[0]
    res = cli(db, "delete", victim["id"])
    assert res.exit_code == 0 and victim["id"] in res.stdout
    assert victim["id"] not in {m["id"] for m in live(db)}
    rows = cli_json(db, "history", victim["id"])
    assert rows[-1]["op"] == "delete" and rows[-1]["actor"] == "api"
    assert rows[-1]["old_content"] == victim["content"]
    again = cli(db, "delete", victim["id"])
    assert again.exit_code == 1 and "no memory" in again.stderr


# --- a real process -----------------------------------------------------------------------
def test_python_m_deltamem_reads_without_loading_the_model(
    bank: tuple[Path, list[dict[str, Any]]],
) -> None:
    db, _ = bank
    proc = subprocess.run(
        [sys.executable, "-m", "deltamem", "--db", str(db), "--llm", "nope", "sessions", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["session_id"] for r in json.loads(proc.stdout)] == ["a1", "a2"]


# --- sessions_file.read_sessions ------------------------------------------------------------
def test_read_sessions_shapes(tmp_path: Path) -> None:
    f = write_json(tmp_path / "w.json", {"sessions": [S1, S2]})
    assert [(s.where, s.session_id) for s in read_sessions(f)] == [
        ("w.json[0]", "a1"),
        ("w.json[1]", "a2"),
    ]
    # JSONL content in a .json file is recognised by its lines
    f = tmp_path / "l.json"
    f.write_text(json.dumps(S1) + "\n" + json.dumps(S2) + "\n", encoding="utf-8")
    assert [s.where for s in read_sessions(f)] == ["l.json:1", "l.json:2"]
    # a bare list of messages is one session; values are kept as text
    f = write_json(tmp_path / "m.json", [user("hi"), bot("hello")])
    [s] = read_sessions(f)
    assert s.where == "m.json" and s.user_id is None and len(s.messages) == 2
    f = write_json(tmp_path / "n.json", {"user_id": 7, "session_id": 8, "messages": []})
    [s] = read_sessions(f)
    assert (s.user_id, s.session_id, s.agent_id, s.timestamp) == ("7", "8", None, None)


def test_read_sessions_skips_blank_lines_and_keeps_line_numbers(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text("\n" + json.dumps(S1) + "\n   \n" + json.dumps(S2) + "\r\n", encoding="utf-8")
    assert [s.where for s in read_sessions(f)] == ["s.jsonl:2", "s.jsonl:4"]


def test_read_sessions_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + (json.dumps(S1) + "\n" + json.dumps(S2)).encode())
    assert [s.session_id for s in read_sessions(f)] == ["a1", "a2"]
    g = tmp_path / "s.json"
    g.write_bytes(b"\xef\xbb\xbf" + json.dumps([S1]).encode())
    assert [s.session_id for s in read_sessions(g)] == ["a1"]


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("42", r"x\.json: a session must be an object"),
        ('"hello"', r"x\.json: a session must be an object"),
        ('{"user_id": "a"}', r"x\.json: session has no 'messages'"),
        ('[{"messages": []}, 5]', r"x\.json"),
        ('{"a": 1,\n "b": }', r"x\.json:2: invalid JSON"),
    ],
)
def test_read_sessions_errors_name_the_place(tmp_path: Path, text: str, pattern: str) -> None:
    f = tmp_path / "x.json"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(SessionFileError, match=pattern):
        sessions = read_sessions(f)
        from deltamem.memory import parse_messages

        for s in sessions:  # what `add` checks next
            try:
                parse_messages(s.messages)
            except ValueError as exc:
                raise SessionFileError(f"{s.where}: {exc}") from exc


def test_read_sessions_bad_utf8_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'{"messages": []}\n{"messages": []}\n{"x": "\xff"}\n')
    with pytest.raises(SessionFileError, match=r"x\.jsonl:3: not valid UTF-8"):
        read_sessions(f)


NO_MODEL = "http://127.0.0.1:9/v1#none"  # never called: the sessions below need no LLM


def test_add_no_infer_stores_verbatim_and_resume_processes_later(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    porto = session("p1", 1, user("I live in Porto with my dog Bolt."), bot("Lovely!"))
    quiet = session("q1", 2, *QUIET, uid="bea")
    src = write_json(tmp_path / "s.json", [porto, quiet])
    res = runner.invoke(app, ["--db", str(db), "--llm", NO_MODEL, "add", str(src), "--no-infer"])
    assert res.exit_code == 0, res.output
    assert "2 session(s) stored verbatim, 2 waiting" in res.stdout
    assert {r["session_id"]: r["status"] for r in session_rows(db)} == {
        "p1": "deferred",
        "q1": "deferred",
    }
    with Memory(db, llm=NO_MODEL) as mem:  # the raw turns are searchable at once
        hits = mem.search("Where does the user live?", user_id="ana")
        assert hits and all(h.kind == "episode" for h in hits)
        assert "Porto" in hits[0].memory.content
    args = ["--db", str(db), "--llm", NO_MODEL, "resume", "--user", "bea", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert [(r["session_id"], r["status"]) for r in json.loads(res.stdout)] == [("q1", "applied")]
    assert {r["session_id"]: r["status"] for r in session_rows(db)}["p1"] == "deferred"


def test_cancel_withdraws_a_queued_session(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Memory(db, llm=NO_MODEL) as mem:
        quiet = mem.add(list(QUIET), user_id="ana", session_id="q1")
        assert quiet.status == "applied"
        mem.log_session([user("I live in Porto."), bot("Nice.")], user_id="ana", session_id="p1")

    def run(*args: str) -> Result:
        return runner.invoke(app, ["--db", str(db), "--llm", NO_MODEL, *args])

    res = run("cancel", "p1", "--user", "ana")
    assert res.exit_code == 0, res.output
    assert "cancelled session p1 (was pending)" in res.stdout
    assert [r["session_id"] for r in session_rows(db)] == ["q1"]
    with Memory(db, llm=NO_MODEL) as mem:
        assert mem.store.count_episodes("ana") == 1  # q1's one turn: p1's went with it
    res = run("cancel", "p1", "--user", "ana")
    assert res.exit_code == 1 and "no session 'p1'" in res.output
    res = run("cancel", "q1", "--user", "ana")
    assert res.exit_code == 1 and "applied" in res.output


def test_command_modules_do_not_import_each_other() -> None:
    """demo and diff share main's helpers through cli.render / cli.options, so
    importing either does not pull in main (no import cycle)."""
    code = (
        "import sys, deltamem.cli.demo, deltamem.cli.diff; "
        "print('deltamem.cli.main' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
