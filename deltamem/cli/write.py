"""`deltamem` commands that write: sessions in, their inference, deletion, export and import."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from deltamem.cli.base import (
    JsonFlag,
    MemoryArg,
    SessionArg,
    SessionsOfUserOpt,
    SessionUserOpt,
    UserOpt,
    app,
    check_user_id,
    full_memory_id,
    id_param,
    memory,
)
from deltamem.cli.render import emit_json, err, fail, ops_table, out, session_progress
from deltamem.cli.sessions_file import SessionFileError, SessionInput, jsonl_lines, read_sessions
from deltamem.expiry import parse_expiry
from deltamem.ids import InvalidId, check_session_key
from deltamem.memory import InvalidSession, SessionFailed, parse_messages, session_hash
from deltamem.porting import ExportFormatError
from deltamem.store.base import SessionConflict, StoreError
from deltamem.timeparse import parse_time
from deltamem.types import AddResult, SessionRecord


def _content_hash(s: SessionInput, user_id: str) -> str:
    """Validate a session as `Memory.log_session` does, without storing it; its hash."""
    try:
        check_session_key(user_id, s.session_id, s.agent_id)
    except InvalidId as exc:
        raise InvalidSession(str(exc)) from exc
    msgs = parse_messages(s.messages)
    try:
        ts = parse_time(s.timestamp) if s.timestamp is not None else None
    except ValueError as exc:
        raise InvalidSession(str(exc)) from exc
    try:
        parse_expiry(s.expires_at) if s.expires_at is not None else None
    except ValueError as exc:
        raise InvalidSession(f"expires_at: {exc}") from exc
    return session_hash(msgs, ts or next((m.timestamp for m in msgs if m.timestamp), None))


@app.command()
def add(
    file: Path = typer.Argument(..., help="JSON or JSONL file of sessions."),
    user: str | None = SessionUserOpt,
    infer: bool = typer.Option(
        True,
        "--infer/--no-infer",
        help="--no-infer stores the sessions verbatim (logged, turns searchable) without "
        "calling the LLM; `deltamem resume` turns them into memories later.",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Ingest sessions. Every session is logged first, so an interrupted run resumes
    where it stopped when started again (or with `deltamem resume`)."""
    try:
        inputs = read_sessions(file)
    except SessionFileError as exc:
        fail(str(exc))
    # every session of the file is checked before the first is logged: a bad one in the
    # middle of a file must not leave the sessions before it logged
    checked: list[tuple[SessionInput, str, str]] = []
    for s in inputs:
        uid = s.user_id or user
        if not uid:
            fail(f"{s.where}: no user_id in the session and no --user given")
        try:
            checked.append((s, uid, _content_hash(s, uid)))
        except InvalidSession as exc:
            fail(f"{s.where}: {exc} (nothing from this file was processed)")
    mem = memory()
    first: dict[tuple[str, str | None, str], str] = {}
    for s, uid, digest in checked:
        sid = s.session_id or digest[:16]
        prior = mem.store.get_session(uid, sid, s.agent_id)
        if first.setdefault((uid, s.agent_id, sid), digest) != digest or (
            prior is not None and prior.content_hash != digest
        ):
            fail(
                f"{s.where}: session {sid!r} of user {uid!r} is already logged with different "
                "content; give the new session its own id (nothing from this file was processed)"
            )
    logged = []
    for s in inputs:
        uid = s.user_id or user
        if not uid:
            fail(f"{s.where}: no user_id in the session and no --user given")
        try:
            rec = mem.log_session(
                s.messages,
                user_id=uid,
                session_id=s.session_id,
                timestamp=s.timestamp,
                agent_id=s.agent_id,
                infer=infer,
                expires_at=s.expires_at,
            )
        except (InvalidSession, SessionConflict) as exc:
            fail(f"{s.where}: {exc} (nothing from this file was processed)")
        logged.append(rec)
    if not infer:
        _report_deferred(logged, as_json)
        return
    results: list[AddResult | dict[str, str]] = []
    failures = 0
    progress = session_progress(as_json)
    with progress:
        task = progress.add_task("ingesting", total=len(logged))
        for rec in logged:
            progress.update(task, description=f"session {rec.session_id}")
            try:
                res = mem.retry(rec.session_id, user_id=rec.user_id, agent_id=rec.agent_id)
            except SessionFailed as exc:
                failures += 1
                err.print(f"[red]failed:[/red] {escape(str(exc))}", soft_wrap=True)
                results.append(
                    {"session_id": rec.session_id, "status": "failed", "error": str(exc)}
                )
            else:
                results.append(res)
                if not as_json:
                    note = " (already applied)" if res.already_applied else ""
                    out.print(ops_table(res.operations, escape(f"session {res.session_id}{note}")))
            progress.advance(task)
    if as_json:
        emit_json(results)
    if failures:
        raise typer.Exit(1)


def _report_deferred(logged: list[SessionRecord], as_json: bool) -> None:
    if as_json:
        emit_json([AddResult(session_id=r.session_id, status=r.status) for r in logged])
        return
    waiting = sum(r.status != "applied" for r in logged)
    out.print(
        f"{len(logged)} session(s) stored verbatim, {waiting} waiting for inference "
        "(`deltamem resume` processes them)"
    )


@app.command("import-sessions")
def import_sessions(
    file: Path = typer.Argument(..., help="A JSONL file of sessions, one a line.", dir_okay=False),
    user: str | None = SessionUserOpt,
    infer: bool = typer.Option(
        True,
        "--infer/--no-infer",
        help="--infer (default) queues the sessions for the workers (`deltamem worker`, as "
        "many as you run, or `deltamem resume`); --no-infer stores them verbatim.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Skip the sessions already logged by their key alone, without comparing their "
        "content: a rerun after an interruption goes on where it stopped.",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Log many sessions fast, with a progress bar: no model call here. Each session is
    logged whole or not at all; a bad line is reported with its number (exit code 1)
    and the good ones are kept."""
    if not file.is_file():
        fail(f"{file}: no such file")
    total = sum(1 for raw in file.open("rb") if raw.strip())
    lines: list[int] = []  # the line number of each session handed to add_many
    bad: list[tuple[int, str]] = []
    progress = session_progress(as_json)
    mem = memory()
    with progress:
        task = progress.add_task("importing", total=total)

        def sessions() -> Iterator[Any]:
            for n, value in jsonl_lines(file):
                if isinstance(value, SessionFileError):
                    bad.append((n, str(value)))
                    progress.advance(task)
                    continue
                lines.append(n)
                yield value

        done = mem.add_many(
            sessions(),
            user_id=user,
            infer=infer,
            resume=resume,
            on_progress=lambda k: progress.advance(task, k),
        )
    bad += [(lines[i], f"{file.name}:{lines[i]}: {why}") for i, why in done.errors]
    bad.sort()
    for _, why in bad:
        err.print(f"[red]bad line:[/red] {escape(why)}", soft_wrap=True)
    summary = {
        "logged": done.logged,
        "already_logged": done.already,
        "bad_lines": [n for n, _ in bad],
        "status": "pending" if infer else "deferred",
    }
    if as_json:
        emit_json(summary)
    else:
        what = "queued for the workers" if infer else "stored verbatim"
        out.print(
            f"{done.logged} session(s) {what}, {done.already} already logged, "
            f"{len(bad)} bad line(s)",
            markup=False,
        )
    if bad:
        raise typer.Exit(1)


@app.command()
def sweep(
    user: str | None = typer.Option(
        None,
        "--user",
        "-u",
        help="Only this user's memories (default: all).",
        callback=check_user_id,
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Delete for good the memories whose expiry has passed (each with a `delete` by
    "expiry" in its history). Expired memories are out of search already."""
    gone = memory().sweep_expired(user)
    if as_json:
        emit_json(gone)  # each memory as it was
    else:
        out.print(f"{len(gone)} expired memories deleted", markup=False)


@app.command()
def resume(
    user: str | None = SessionsOfUserOpt,
    as_json: bool = JsonFlag,
) -> None:
    """Process logged sessions that are still pending (after a crash or a queue), and
    those added with --no-infer."""
    results = memory().process_pending(user)
    emit_json(results) if as_json else out.print(f"{len(results)} pending session(s) applied")


@app.command()
def retry(
    session_id: str = SessionArg,
    user: str = UserOpt,
    as_json: bool = JsonFlag,
) -> None:
    """Process a failed (or pending) session again."""
    try:
        res = memory().retry(session_id, user_id=user)
    except KeyError as exc:
        fail(str(exc.args[0]))
    except SessionFailed as exc:
        fail(str(exc), 1)
    emit_json(res) if as_json else out.print(
        ops_table(res.operations, escape(f"session {session_id}"))
    )


@app.command()
def cancel(
    session_id: str = SessionArg,
    user: str = UserOpt,
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="The agent the session was added for, if any.",
        callback=id_param("agent_id"),
    ),
) -> None:
    """Cancel a queued job: withdraw a session that is not applied (pending, deferred or
    failed) from the log, with its episodes. A worker processing it drops its result.
    An applied session cannot be cancelled (delete its memories instead)."""
    was = memory().cancel(session_id, user_id=user, agent_id=agent)
    if was is None:
        fail(f"no session {session_id!r} for user {user!r}", 1)
    if was == "applied":
        fail(f"session {session_id!r} is applied: delete its memories instead", 1)
    out.print(f"cancelled session {escape(session_id)} (was {was})", soft_wrap=True)


@app.command()
def replay(user: str = UserOpt, as_json: bool = JsonFlag) -> None:
    """Rebuild a user's memory from the session log with the current manager."""
    results = memory().replay(user)
    if as_json:
        emit_json(results)
    else:
        out.print(f"replayed {len(results)} session(s) for {user}")


@app.command()
def delete(memory_id: str = MemoryArg) -> None:
    """Delete one memory (recorded in its history)."""
    mem = memory()
    full = full_memory_id(mem, memory_id, deleted=False)
    gone = mem.get(full)
    if gone is None or not mem.delete(full):
        fail(f"no memory {memory_id!r}", 1)
    out.print(f"deleted {escape(full)}: {escape(gone.content)}", soft_wrap=True)


@app.command("export")
def export_user(
    user: str = UserOpt,
    out_file: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="The file to write (default: standard output).",
        dir_okay=False,
    ),
) -> None:
    """Write everything of a user to a portable JSON Lines file: the session log, each
    memory with its whole history, the episodes (no vectors). `deltamem import` loads
    it into any store, SQLite or PostgreSQL."""
    mem = memory()
    if user not in mem.users(user):
        fail(f"nothing is stored for user {user!r}", 1)
    if out_file is None:
        wrote = mem.export_user(user, sys.stdout)
        sys.stdout.flush()
    else:
        wrote = mem.export_user(user, out_file)
    err.print(
        f"exported {wrote.sessions} session(s), {wrote.memories} memories and "
        f"{wrote.episodes} episode(s) of {user!r}" + (f" to {out_file}" if out_file else ""),
        markup=False,
        soft_wrap=True,
    )


@app.command("import")
def import_user(
    file: str = typer.Argument(
        ..., help="An export file (`deltamem export`), or - for standard input."
    ),
    user: str | None = typer.Option(
        None,
        "--user",
        "-u",
        help="Import as this user (default: the user the file was exported as).",
        callback=check_user_id,
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Load a user's export file into this store, embedding it with this store's
    embedder. Importing the same file again changes nothing."""
    source: Any = sys.stdin.buffer if file == "-" else Path(file)
    if file != "-" and not Path(file).is_file():
        fail(f"no file {file!r}")
    try:
        got = memory().import_user(source, user_id=user)
    except ExportFormatError as exc:
        fail(f"{file}: {exc}", 1)
    except (SessionConflict, StoreError) as exc:
        fail(str(exc), 1)
    if as_json:
        emit_json(got.as_dict())
        return
    out.print(
        f"imported {got.sessions} session(s), {got.memories} memories and {got.episodes} "
        f"episode(s) as {got.user_id!r}; already there: {got.skipped_sessions} session(s), "
        f"{got.skipped_memories} memories",
        markup=False,
        soft_wrap=True,
    )
