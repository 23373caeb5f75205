"""Kill -9 drill for the service: SIGKILL `deltamem serve` while its worker ingests.

    python benchmarks/crash_trials.py --trials 100 --json
    python benchmarks/crash_trials.py --trials 100 --backend postgres --json

Each trial starts ``deltamem --db TMP.db --llm SPEC serve`` (or, with
``--backend postgres``, a fresh database on a throwaway PostgreSQL that the
script starts and stops) as a subprocess on
127.0.0.1, submits sessions for a few users (202-acknowledged or not), SIGKILLs
the server at a random moment (while sessions are still being submitted, or after
the worker has applied a random number of them, with a random delay so the kill
lands inside an LLM call, an embedding or a commit), checks the database as the
crash left it, restarts the server, waits until the log is drained and checks again:

* lost: a 202-acknowledged session missing from the log (must be 0);
* half_applied: a session with memories or history rows but not marked applied, or
  applied with history rows (adds and updates) that differ from its recorded
  operations (must be 0);
* not_applied: a logged session still not applied after the restart (must be 0);
* applied_twice: a session applied more than once (attempts > 1 with no failure,
  or more history ``add`` rows than recorded ``add`` operations) (must be 0);
* order_violations: a user's sessions applied out of submission order (must be 0);
* broken_chains: a memory whose history is not one unbroken chain: an add, then
  updates each starting from the content the previous row left, the memory's
  version = its number of history rows, its content = the last row's, every row
  from an applied session (must be 0);
* wrong_content: (scripted LLM only) a session whose recorded operations are not
  exactly the adds and updates the LLM returned for it (must be 0).

Sessions after a user's first also change, half the time, a fact of an earlier
session of theirs (``change#N.K``: the memory of fact N becomes its version K), so
the drill kills the server during updates and version chains as well as adds.

``--llm fake`` (the default) is a scripted OpenAI-compatible LLM served by this
script on 127.0.0.1 with a random 50-300 ms delay per call: the server does real
HTTP LLM calls, real embeddings and real SQLite commits, and what each session
must produce is known. ``--llm tiny`` runs the real 135M GGUF model instead (slow
on a loaded machine: 5-60 s a session; the content check is then skipped).
Everything started here (servers, the fake LLM) is stopped before exit, Ctrl-C
included. Prints JSON figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

API_KEY = "crash-drill-key-0123456789"
TENANT = "drill"
HEADERS = {"X-API-Key": API_KEY}
SUBJECTS = ["Martin", "Sarah", "Lena", "Priya", "Tomas", "Ana", "Jonas", "Mei", "Omar", "Ines"]
VERBS = ["adopted", "repaired", "painted", "sold", "borrowed", "photographed", "lost", "found"]
OBJECTS = [
    "a red bicycle",
    "an old violin",
    "a rescue greyhound",
    "a sailing boat",
    "a vintage camera",
    "a cast-iron stove",
    "a chess set",
    "a mountain tent",
    "a sourdough starter",
    "a telescope",
    "a typewriter",
    "a bonsai tree",
]
PLACES = ["in Porto", "in Kyoto", "in Lagos", "in Oslo", "in Quito", "in Hanoi", "in Tunis"]


FACT_SPACE = 6720  # distinct fact sentences


def fact(n: int) -> str:
    """The n-th fact sentence: distinct facts for distinct n (n < FACT_SPACE)."""
    s, v, o, p = (
        n % len(SUBJECTS),
        (n // len(SUBJECTS)) % len(VERBS),
        (n // (len(SUBJECTS) * len(VERBS))) % len(OBJECTS),
        (n // (len(SUBJECTS) * len(VERBS) * len(OBJECTS))) % len(PLACES),
    )
    return f"{SUBJECTS[s]} {VERBS[v]} {OBJECTS[o]} {PLACES[p]}."


def changed(n: int, version: int) -> str:
    """Fact n as its `version`-th update says it (version 0: as first added)."""
    return fact(n) if version == 0 else f"{fact(n)[:-1]}, as of version {version}."


# --- a scripted OpenAI-compatible LLM on loopback -----------------------------------------
FACT_RE = re.compile(r"fact#(\d+)")
CHANGE_RE = re.compile(r"change#(\d+)\.(\d+)")
MEMORY_LINE_RE = re.compile(r"^(\w+) \| [^|\n]+ \| (.+)$", re.MULTILINE)


def manager_reply(prompt: str) -> list[dict[str, Any]]:
    """The operations for a manager prompt: an add of fact(N) per ``fact#N`` in the
    conversation, and per ``change#N.K`` an update of the memory shown holding fact
    N (under its short id) to changed(N, K); a change whose memory is not shown gets
    no operation (the content check then reports the session)."""
    known, _, convo = prompt.partition("Conversation")
    ops: list[dict[str, Any]] = [
        {"op": "add", "type": "event", "content": fact(int(n))}
        for n in dict.fromkeys(FACT_RE.findall(convo))
    ]
    shown = MEMORY_LINE_RE.findall(known)
    for n, k in dict.fromkeys(CHANGE_RE.findall(convo)):
        stem = fact(int(n))[:-1]
        short = next((sid for sid, text in shown if text.startswith(stem)), None)
        if short is not None:
            ops.append(
                {"op": "update", "id": short, "type": "event", "content": changed(int(n), int(k))}
            )
    return ops


class FakeLLM:
    """``POST /v1/chat/completions``: for a manager prompt, the operations of
    `manager_reply` (adds of ``fact#N``, updates for ``change#N.K``); anything else
    gets a short text. Each call sleeps a random `delay` first, so a kill can land
    inside an LLM call."""

    def __init__(
        self,
        delay: tuple[float, float] = (0.05, 0.3),
        seed: int = 0,
        hang: Callable[[str], bool] | None = None,
    ) -> None:
        """`hang`: prompts it holds true for are never answered (the request is read
        and the connection held open until `close`): a hung model."""
        self.delay = delay
        self.rng = random.Random(seed)
        self.hang = hang
        self.hanging = 0  # requests held unanswered now
        self._release = threading.Event()
        self.calls = 0
        # how often each conversation (its fact numbers) was sent to be planned:
        # above 1 means LLM work was spent twice on a session
        self.planned: Counter[tuple[int, ...]] = Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.calls += 1
                prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
                if outer.hang is not None and outer.hang(prompt):
                    outer.hanging += 1
                    outer._release.wait()
                    outer.hanging -= 1
                    return
                time.sleep(outer.rng.uniform(*outer.delay))
                if "Conversation" in prompt:
                    convo = prompt.split("Conversation", 1)[1]
                    outer.planned[tuple(sorted({int(n) for n in FACT_RE.findall(convo)}))] += 1
                    text = json.dumps({"operations": manager_reply(prompt)})
                else:
                    text = "I do not know."
                out = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 10},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server was killed while waiting for this answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def spec(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1#fake"

    def close(self) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# --- the server under test ---------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``deltamem serve`` in its own process group, logging to a file."""

    def __init__(
        self,
        db: str | Path,
        llm: str,
        log: Path,
        *,
        keys: str = f"{API_KEY}={TENANT}",
        options: Sequence[str] = (),
    ) -> None:
        """`options`: more global options (before `serve`), e.g. --llm-timeout."""
        self.port = free_port()
        self.log = log.open("ab")
        # the scripted model answers with whole operation lists: the "session" strategy
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "DELTAMEM_MANAGER": "session"}
        env.pop("DELTAMEM_API_KEYS", None)
        env.pop("DELTAMEM_API_KEYS_FILE", None)
        cmd = [sys.executable, "-m", "deltamem", "--db", str(db), "--llm", llm, *options, "serve"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--keys", keys]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}; see {self.log.name}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"server not ready in {timeout:g}s; see {self.log.name}")

    def health(self) -> dict[str, Any] | None:
        try:
            return httpx.get(self.url + "/healthz", timeout=2.0).json()
        except (httpx.HTTPError, ValueError):
            return None

    def kill9(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


_live: list[Server] = []


@contextlib.contextmanager
def server(db: str | Path, llm: str, log: Path) -> Iterator[Server]:
    srv = Server(db, llm, log)
    _live.append(srv)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        _live.remove(srv)


def stop_all() -> None:
    for srv in list(_live):
        with contextlib.suppress(Exception):
            srv.kill9()


# --- reading the database as the crash left it ----------------------------------------------
def is_pg(db: str | Path) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


def _read_pg(db: str) -> dict[str, Any]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(db, row_factory=dict_row, autocommit=True) as conn:
        sessions = conn.execute("SELECT * FROM sessions ORDER BY seq").fetchall()
        history = conn.execute("SELECT * FROM history ORDER BY id").fetchall()
        memories = conn.execute(
            "SELECT id, user_id, session_id, content, version FROM memories"
        ).fetchall()
    for row in sessions:  # as the SQLite store has them: JSON text, ISO text
        if row["operations"] is not None and not isinstance(row["operations"], str):
            row["operations"] = json.dumps(row["operations"])
        if row["applied_at"] is not None and not isinstance(row["applied_at"], str):
            row["applied_at"] = row["applied_at"].isoformat()
    return {"sessions": sessions, "history": history, "memories": memories}


def read_db(db: str | Path) -> dict[str, Any]:
    if is_pg(db):
        return _read_pg(str(db))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        sessions = [dict(r) for r in conn.execute("SELECT * FROM sessions ORDER BY seq")]
        history = [dict(r) for r in conn.execute("SELECT * FROM history ORDER BY id")]
        memories = [
            dict(r)
            for r in conn.execute("SELECT id, user_id, session_id, content, version FROM memories")
        ]
    finally:
        conn.close()
    return {"sessions": sessions, "history": history, "memories": memories}


def count_status(db: str | Path) -> dict[str, int]:
    if is_pg(db):
        import psycopg

        try:
            with psycopg.connect(str(db), autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT status, count(*) FROM sessions GROUP BY status"
                ).fetchall()
        except psycopg.errors.UndefinedTable:
            rows = []
        return {st: n for st, n in rows}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT status, count(*) FROM sessions GROUP BY status").fetchall()
    except sqlite3.OperationalError:  # not created yet
        rows = []
    finally:
        conn.close()
    return {s: n for s, n in rows}


def check_consistent(state: dict[str, Any]) -> dict[str, int]:
    """No half-applied session: rows only for applied sessions, history = operations."""
    half = 0
    twice = 0
    by_session: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for h in state["history"]:
        by_session.setdefault((h["user_id"], h["session_id"]), []).append(h)
    mem_sessions = {(m["user_id"], m["session_id"]) for m in state["memories"]}
    for s in state["sessions"]:
        key = (s["user_id"], s["session_id"])
        rows = by_session.get(key, [])
        if s["status"] != "applied":
            if rows or key in mem_sessions or s["operations"] is not None:
                half += 1
            continue
        ops = json.loads(s["operations"] or "[]")
        writes = sorted((o["op"], o["memory_id"]) for o in ops if o["op"] in WRITES)
        hist = sorted((h["op"], h["memory_id"]) for h in rows if h["op"] in WRITES)
        if len(hist) > len(writes) or s["attempts"] > 1:
            twice += 1
        elif hist != writes:
            half += 1
    return {"half_applied": half, "applied_twice": twice}


WRITES = ("add", "update")


def check_chains(state: dict[str, Any]) -> list[str]:
    """Every memory's history is one unbroken chain: one add first, then updates each
    starting from the content the row before left (no update without its prior
    version), version = number of rows, content = the last row's, and every row
    from an applied session (nothing of an unapplied session). One note per fault."""
    applied = {
        (s["user_id"], s["session_id"]) for s in state["sessions"] if s["status"] == "applied"
    }
    rows: dict[str, list[dict[str, Any]]] = {}
    for h in state["history"]:  # in id order: the order they were written
        rows.setdefault(h["memory_id"], []).append(h)
    faults: list[str] = []
    for m in state["memories"]:
        chain = [h for h in rows.pop(m["id"], []) if h["op"] in WRITES]
        where = f"memory {m['id'][:8]} ({m['user_id']})"
        if not chain or chain[0]["op"] != "add" or any(h["op"] != "update" for h in chain[1:]):
            faults.append(f"{where}: history {[h['op'] for h in chain]} is not add, updates")
            continue
        for before, after in itertools.pairwise(chain):
            if after["old_content"] != before["new_content"]:
                faults.append(f"{where}: an update does not start from the version before it")
        if m["version"] != len(chain):
            faults.append(f"{where}: version {m['version']} but {len(chain)} history rows")
        if m["content"] != chain[-1]["new_content"]:
            faults.append(f"{where}: content is not the last history row's")
        stray = [h["session_id"] for h in chain if (h["user_id"], h["session_id"]) not in applied]
        if stray:
            faults.append(f"{where}: rows of sessions not applied: {stray}")
    for memory_id, left in rows.items():  # history of a memory that is not there
        if any(h["op"] == "update" for h in left) and not any(h["op"] == "delete" for h in left):
            faults.append(f"memory {memory_id[:8]}: updates in history, no memory, no delete")
    return faults


@dataclass
class Submitted:
    user: str
    session_id: str
    facts: list[int]
    changes: list[tuple[int, int]] = field(default_factory=list)  # (fact, new version)
    acked: bool = False


@dataclass
class TrialResult:
    seed: int
    kill_phase: str  # "submitting" | "ingesting" | "drained"
    applied_at_kill: int
    logged_at_kill: int
    acked: int
    logged: int
    lost: int = 0
    half_applied_at_crash: int = 0
    half_applied: int = 0
    not_applied: int = 0
    failed: int = 0
    applied_twice: int = 0
    order_violations: int = 0
    broken_chains_at_crash: int = 0
    broken_chains: int = 0
    wrong_content: int = 0
    updates: int = 0  # update rows in the history after the drain
    changes_acked: int = 0  # changes asked for by 202-acknowledged sessions
    recover_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.half_applied_at_crash
            or self.half_applied
            or self.not_applied
            or self.failed
            or self.applied_twice
            or self.order_violations
            or self.broken_chains_at_crash
            or self.broken_chains
            or self.wrong_content
        )


def session_body(sub: Submitted, i: int) -> dict[str, Any]:
    facts = " and ".join(f"fact#{n}" for n in sub.facts)
    messages = [
        {"role": "user", "content": f"Please remember {facts}."},
        {"role": "assistant", "content": "Noted."},
    ]
    for n, k in sub.changes:  # the current wording, so that retrieval shows the memory
        messages.append(
            {"role": "user", "content": f"{changed(n, k - 1)} That has changed: change#{n}.{k}"}
        )
    return {
        "user_id": sub.user,
        "session_id": sub.session_id,
        "timestamp": f"2029-02-{1 + i % 27:02d}T10:00:00",
        "messages": messages,
    }


def plan_sessions(rng: random.Random, seed: int, users: int, per_user: int) -> list[Submitted]:
    """Sessions in submission order (round-robin over users): 1-3 new facts each, and
    in half of a user's later sessions a change of one of their earlier facts.
    Fact numbers step by 131 (coprime with FACT_SPACE): a user's facts then differ in
    every word, not only the first (consecutive facts differ in the subject alone, and
    the manager drops an update that reads like another known memory)."""
    subs: list[Submitted] = []
    n = seed * 97 % 1000
    step = 0
    versions: dict[str, dict[int, int]] = {f"user{u}": {} for u in range(users)}
    for i in range(per_user):
        for u in range(users):
            user = f"user{u}"
            k = rng.randint(1, 3)
            facts = [(n + (step + j) * 131) % FACT_SPACE for j in range(k)]
            step += k
            changes = []
            if versions[user] and rng.random() < 0.5:
                target = rng.choice(sorted(versions[user]))
                versions[user][target] += 1
                changes.append((target, versions[user][target]))
            subs.append(Submitted(user, f"s{i:03d}", facts, changes))
            for f in facts:
                versions[user][f] = 0
    return subs


def run_trial(
    seed: int,
    workdir: Path,
    llm: str,
    *,
    users: int = 3,
    per_user: int = 4,
    check_content: bool = True,
    drain_timeout: float = 120.0,
    db: str | None = None,
) -> TrialResult:
    """One trial in `workdir` (a fresh directory): submit, SIGKILL, restart, check.
    `db`: a postgresql:// URL of an empty database (default: SQLite in `workdir`)."""
    rng = random.Random(seed)
    db = db or str(workdir / "drill.db")
    log = workdir / "server.log"
    subs = plan_sessions(rng, seed, users, per_user)
    total = len(subs)
    phase = "submitting" if rng.random() < 0.25 else "ingesting"
    kill_after_acks = rng.randint(1, total) if phase == "submitting" else total
    kill_after_applied = rng.randint(0, total - 1)
    jitter = rng.uniform(0.0, 0.4)

    srv = Server(db, llm, log)
    _live.append(srv)
    try:
        srv.wait_ready()
        acks = threading.Semaphore(0)
        done = threading.Event()

        def submit() -> None:
            with httpx.Client(base_url=srv.url, headers=HEADERS, timeout=10.0) as client:
                for i, sub in enumerate(subs):
                    try:
                        r = client.post("/v1/sessions", json=session_body(sub, i))
                    except httpx.HTTPError:
                        break  # the server is gone: the rest were never acknowledged
                    if r.status_code == 202:
                        sub.acked = True
                        acks.release()
                    else:
                        raise AssertionError(f"submission answered {r.status_code}: {r.text}")
            done.set()

        submitter = threading.Thread(target=submit, daemon=True)
        submitter.start()
        deadline = time.monotonic() + drain_timeout
        if phase == "submitting":
            for _ in range(kill_after_acks):
                if not acks.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    break
            time.sleep(jitter / 20)
        else:
            done.wait(max(0.0, deadline - time.monotonic()))
            while time.monotonic() < deadline:
                if count_status(db).get("applied", 0) >= kill_after_applied:
                    break
                time.sleep(0.02)
            time.sleep(jitter)
        before_kill = count_status(db)
        srv.kill9()
        _live.remove(srv)
        submitter.join(15)
    except BaseException:
        srv.kill9()
        if srv in _live:
            _live.remove(srv)
        raise

    crash = read_db(db)
    applied_at_kill = sum(s["status"] == "applied" for s in crash["sessions"])
    if phase == "ingesting" and applied_at_kill >= total:
        phase = "drained"
    result = TrialResult(
        seed=seed,
        kill_phase=phase,
        applied_at_kill=applied_at_kill,
        logged_at_kill=len(crash["sessions"]),
        acked=sum(s.acked for s in subs),
        logged=len(crash["sessions"]),
    )
    result.half_applied_at_crash = check_consistent(crash)["half_applied"]
    chain_faults = check_chains(crash)
    result.broken_chains_at_crash = len(chain_faults)
    result.notes += [f"at the crash: {f}" for f in chain_faults[:5]]
    if before_kill.get("failed"):
        result.notes.append(f"failed before the kill: {before_kill['failed']}")

    # restart and wait until the log is drained
    t0 = time.monotonic()
    with server(db, llm, log) as srv2:
        deadline = time.monotonic() + drain_timeout
        while time.monotonic() < deadline:
            st = count_status(db)
            h = srv2.health()
            if st.get("pending", 0) == 0 and h is not None and not h["worker"]["busy"]:
                break
            time.sleep(0.05)
        result.recover_s = round(time.monotonic() - t0, 2)
    final = read_db(db)

    logged = {(s["user_id"], s["session_id"]): s for s in final["sessions"]}
    result.logged = len(logged)
    for sub in subs:
        if sub.acked and (f"{TENANT}:{sub.user}", sub.session_id) not in logged:
            result.lost += 1
    cons = check_consistent(final)
    result.half_applied = cons["half_applied"]
    result.applied_twice = cons["applied_twice"]
    chain_faults = check_chains(final)
    result.broken_chains = len(chain_faults)
    result.notes += chain_faults[:5]
    result.updates = sum(h["op"] == "update" for h in final["history"])
    result.changes_acked = sum(len(sub.changes) for sub in subs if sub.acked)
    result.not_applied = sum(s["status"] == "pending" for s in final["sessions"])
    result.failed = sum(s["status"] == "failed" for s in final["sessions"])

    # per-user order: log order = submission order, and applied in log order
    by_user: dict[str, list[dict[str, Any]]] = {}
    for s in final["sessions"]:
        by_user.setdefault(s["user_id"], []).append(s)
    for user, rows in by_user.items():
        submitted = [sub.session_id for sub in subs if f"{TENANT}:{sub.user}" == user and sub.acked]
        in_log = [r["session_id"] for r in rows if r["session_id"] in set(submitted)]
        if in_log != submitted:
            result.order_violations += 1
            result.notes.append(f"{user}: log order {in_log} != submission order {submitted}")
        applied = [r for r in rows if r["applied_at"]]
        by_time = sorted(applied, key=lambda r: datetime.fromisoformat(r["applied_at"]))
        if [r["seq"] for r in by_time] != [r["seq"] for r in applied]:
            result.order_violations += 1
            result.notes.append(f"{user}: applied out of log order")

    if check_content:
        want = {
            (f"{TENANT}:{s.user}", s.session_id): {("add", fact(n)) for n in s.facts}
            | {("update", changed(n, k)) for n, k in s.changes}
            for s in subs
        }
        for key, s in logged.items():
            ops = json.loads(s["operations"] or "[]")
            got = {(o["op"], o["content"]) for o in ops}
            if s["status"] == "applied" and got != want.get(key):
                result.wrong_content += 1
                result.notes.append(f"{key}: operations {sorted(got)} != {sorted(want[key])}")
    return result


class PgCluster:
    """A throwaway PostgreSQL for `--backend postgres`: one empty database per
    trial. Uses the `PgServer` of benchmarks/api_load.py (started and stopped here)."""

    def __init__(self) -> None:
        spec = importlib.util.spec_from_file_location(
            "api_load", Path(__file__).resolve().parent / "api_load.py"
        )
        assert spec is not None and spec.loader is not None
        mod = sys.modules.setdefault("api_load", importlib.util.module_from_spec(spec))
        if not hasattr(mod, "PgServer"):
            spec.loader.exec_module(mod)
        self.server = mod.PgServer()
        self.n = 0

    def fresh(self) -> str:
        import psycopg

        self.n += 1
        name = f"drill_{os.getpid()}_{self.n}"
        with psycopg.connect(self.server.uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        base, sep, query = self.server.uri.partition("?")
        url = base.rsplit("/", 1)[0] + "/" + name + sep + query
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def drop(self, url: str) -> None:
        import psycopg

        name = url.partition("?")[0].rsplit("/", 1)[1]
        with psycopg.connect(self.server.uri, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        self.server.stop()


def summarise(results: list[TrialResult]) -> dict[str, Any]:
    keys = (
        "lost",
        "half_applied_at_crash",
        "half_applied",
        "not_applied",
        "failed",
        "applied_twice",
        "order_violations",
        "broken_chains_at_crash",
        "broken_chains",
        "wrong_content",
        "updates",
        "changes_acked",
    )
    phases: dict[str, int] = {}
    for r in results:
        phases[r.kill_phase] = phases.get(r.kill_phase, 0) + 1
    recover = sorted(r.recover_s for r in results)
    return {
        "trials": len(results),
        "trials_ok": sum(r.ok for r in results),
        "kill_phase": phases,
        "sessions_acked": sum(r.acked for r in results),
        "sessions_logged": sum(r.logged for r in results),
        **{k: sum(getattr(r, k) for r in results) for k in keys},
        "recover_s_p50": recover[len(recover) // 2] if recover else None,
        "recover_s_max": recover[-1] if recover else None,
        "failures": [asdict(r) for r in results if not r.ok][:10],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--users", type=int, default=3)
    ap.add_argument("--sessions-per-user", type=int, default=4)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--llm", default="fake", help="fake (scripted, loopback) | tiny | any spec")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--drain-timeout", type=float, default=120.0, help="seconds to wait for a drain"
    )
    ap.add_argument("--max-seconds", type=float, default=3600.0, help="stop starting trials after")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    fake = FakeLLM(seed=args.seed) if args.llm == "fake" else None
    llm = fake.spec if fake else args.llm
    results: list[TrialResult] = []
    started = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    pg: PgCluster | None = None
    try:
        if args.backend == "postgres":
            pg = PgCluster()
        for t in range(args.trials):
            if time.monotonic() - started > args.max_seconds:
                break
            url = pg.fresh() if pg else None
            with tempfile.TemporaryDirectory(prefix="deltamem-crash-") as tmp:
                r = run_trial(
                    args.seed * 100_003 + t,
                    Path(tmp),
                    llm,
                    users=args.users,
                    per_user=args.sessions_per_user,
                    check_content=fake is not None,
                    drain_timeout=args.drain_timeout,
                    db=url,
                )
            if pg and url:
                pg.drop(url)
            results.append(r)
            # progress on stderr; with --json the summary alone goes to stdout
            print(
                f"trial {t + 1}: {r.kill_phase} applied@kill={r.applied_at_kill} "
                f"acked={r.acked} ok={r.ok} recover={r.recover_s}s {r.notes}",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        print("interrupted; stopping what was started", file=sys.stderr)
    finally:
        stop_all()
        if fake:
            fake.close()
        if pg:
            pg.stop()
    out = {"backend": args.backend, "llm": "fake" if fake else args.llm, **summarise(results)}
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=None if args.json else 2))
    sys.exit(0 if results and all(r.ok for r in results) else 1)


if __name__ == "__main__":
    main()
