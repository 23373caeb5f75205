"""`deltamem` command line: the library's calls, one command each, `--json` everywhere."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from deltamem.cli.options import OPTS
from deltamem.cli.render import (
    emit_json,
    err,
    fail,
    hits_table,
    memories_table,
    ops_table,
    out,
)
from deltamem.cli.sessions_file import (
    SessionFileError,
    SessionInput,
    jsonl_lines,
    read_sessions,
)
from deltamem.expiry import parse_duration, parse_expiry
from deltamem.ids import (
    MAX_ID_CHARS,
    MAX_USER_ID_CHARS,
    InvalidId,
    check_session_key,
    id_fault,
)
from deltamem.memory import InvalidSession, Memory, SessionFailed, parse_messages, session_hash
from deltamem.porting import ExportFormatError
from deltamem.server.config import WorkerSettings
from deltamem.store.base import AmbiguousMemoryId, SessionConflict, StoreError, UnknownMemory
from deltamem.timeparse import parse_time
from deltamem.types import AddResult, MemoryType, SearchFilters, SessionRecord, SessionStatus

app = typer.Typer(
    help="Long-term memory for LLM agents that stays right as facts change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


JsonFlag = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _id_param(what: str, max_chars: int = MAX_ID_CHARS) -> Any:
    """A typer callback holding an id to the grammar of `deltamem.ids` (exit code 2)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        fault = id_fault(value, max_chars)
        if fault is not None:
            raise typer.BadParameter(f"{what} {fault}")
        return value

    return check


def _one_of(choices: tuple[str, ...]) -> Any:
    """A typer callback that takes one of `choices` (exit code 2 for another value)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


_user_id = _id_param("user_id", MAX_USER_ID_CHARS)
UserOpt = typer.Option(
    ..., "--user", "-u", help="The user whose memory this is.", callback=_user_id
)
MemoryArg = typer.Argument(
    ...,
    callback=_id_param("memory_id"),
    help="The memory's id, or the start of it that no other memory's id has (such as the "
    "8 characters `memories` and `search` print).",
)
ConcurrencyOpt = typer.Option(
    WorkerSettings.concurrency,
    "--concurrency",
    envvar="DELTAMEM_WORKER_CONCURRENCY",
    min=1,
    help="Users the worker processes at once (one session at a time per user), so that "
    "one user's slow or hung model does not hold back the others.",
)


def _secs(value: str | None) -> float | None:
    """A duration option ('1h', '30m') in seconds (exit code 2 if unreadable)."""
    if value is None or not value.strip():
        return None
    try:
        return parse_duration(value).total_seconds()
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sweep-every") from exc


SweepOpt = typer.Option(
    None,
    "--sweep-every",
    envvar="DELTAMEM_SWEEP_EVERY",
    help="Delete the expired memories every so often (1h, 30m, 1d), as `deltamem sweep` "
    "does; default: never here.",
)


@app.callback()
def main(
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="DELTAMEM_DB",
        help="SQLite file (default: user data dir) or a postgresql:// URL.",
    ),
    llm: str | None = typer.Option(
        None,
        "--llm",
        envvar="DELTAMEM_LLM",
        help="local | tiny | PATH.gguf | http://host:port/v1#model | openai:MODEL",
    ),
    llm_timeout: float | None = typer.Option(
        None,
        "--llm-timeout",
        envvar="DELTAMEM_LLM_TIMEOUT",
        min=0.001,
        help="Seconds one LLM call may take before it counts as failed (default 300). "
        "A worker parks a session whose model never answers after at most "
        "3 x this (its 3 tries) plus 6 s of backoff.",
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        envvar="DELTAMEM_EMBEDDER",
        help="local (the embedded MiniLM, default) | http://host:port/v1#model@dim (an "
        "OpenAI-compatible embedding server). Open a store with the embedder it was made with.",
    ),
    adapter: str | None = typer.Option(
        None,
        "--adapter",
        envvar="DELTAMEM_ADAPTER",
        help="A GGUF LoRA adapter (`deltamem train export`) applied to the llama.cpp "
        "model of --llm (local, tiny or a .gguf path).",
    ),
) -> None:
    OPTS.db, OPTS.llm, OPTS.llm_timeout, OPTS.embedder = db, llm, llm_timeout, embedder
    OPTS.adapter = adapter


def memory() -> Memory:
    return Memory(OPTS.db, llm=OPTS.llm_config, embedder=OPTS.embedder)


def _full_memory_id(mem: Memory, given: str, *, deleted: bool = True) -> str:
    """The id of the memory that `given` names: its id, or the start of it that no
    other memory's id has (as git takes a short commit id). With `deleted`, the
    deleted memories (their history is kept) count too. Exit 1 when none does, 2
    when several do (naming them)."""
    try:
        return mem.store.resolve_memory_id(given, deleted=deleted)
    except UnknownMemory:
        fail(f"no memory {given!r}", 1)
    except AmbiguousMemoryId as exc:
        lines = [f"memory id {given!r} is ambiguous; give more characters of one of:"]
        for mid in exc.candidates:
            m = mem.get(mid)
            lines.append(f"  {mid}  {m.content if m is not None else '(deleted)'}")
        if exc.more:
            lines.append("  ...")
        fail("\n".join(lines))


# --- write ----------------------------------------------------------------------------
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
    user: str | None = typer.Option(
        None, "--user", "-u", help="User for sessions without one.", callback=_user_id
    ),
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
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=as_json or not err.is_terminal,
    )
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
    user: str | None = typer.Option(
        None, "--user", "-u", help="User for sessions without one.", callback=_user_id
    ),
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
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=as_json or not err.is_terminal,
    )
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
        None, "--user", "-u", help="Only this user's memories (default: all).", callback=_user_id
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
    user: str | None = typer.Option(
        None, "--user", "-u", help="Only this user's sessions (default: all).", callback=_user_id
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Process logged sessions that are still pending (after a crash or a queue), and
    those added with --no-infer."""
    results = memory().process_pending(user)
    emit_json(results) if as_json else out.print(f"{len(results)} pending session(s) applied")


@app.command()
def retry(
    session_id: str = typer.Argument(
        ...,
        help="The session's id, as `deltamem sessions` lists it.",
        callback=_id_param("session_id"),
    ),
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
    session_id: str = typer.Argument(
        ...,
        help="The session's id, as `deltamem sessions` lists it.",
        callback=_id_param("session_id"),
    ),
    user: str = UserOpt,
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="The agent the session was added for, if any.",
        callback=_id_param("agent_id"),
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
    full = _full_memory_id(mem, memory_id, deleted=False)
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
        callback=_user_id,
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


# --- read ------------------------------------------------------------------------------
@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for, in words."),
    user: str = UserOpt,
    limit: int = typer.Option(20, "--limit", "-k", min=1, help="The most hits to show."),
    as_json: bool = JsonFlag,
) -> None:
    """Hybrid (embedding + keyword) search over a user's memories: facts and the raw
    turns of their sessions (episodes), best first. Relevance is 100 for a hit first
    in both the embedding and the keyword ranking, 50 for one first in one of them."""
    hits = memory().search(query, user_id=user, limit=limit)
    if as_json:
        emit_json(hits)
    elif not hits:
        out.print(f"nothing found for user {user!r}", markup=False)
    else:
        out.print(hits_table(hits, escape(f"search: {query}")))


@app.command()
def answer(
    question: str = typer.Argument(..., help="The question, in words."),
    user: str = UserOpt,
    as_json: bool = JsonFlag,
) -> None:
    """Answer a question from a user's memories with the LLM."""
    reply = memory().answer(question, user_id=user)
    emit_json(reply) if as_json else out.print(reply.text, markup=False)


@app.command()
def memories(
    user: str = UserOpt,
    memory_type: str | None = typer.Option(
        None,
        "--type",
        help=f"Only the memories of this type: {' | '.join(get_args(MemoryType))}.",
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only the memories of events at or after this time (ISO 8601)."
    ),
    until: str | None = typer.Option(
        None, "--until", help="Only the memories of events at or before this time (ISO 8601)."
    ),
    session: str | None = typer.Option(
        None, "--session", help="Only the memories whose latest version this session wrote."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """List a user's live memories with their provenance."""
    try:
        filters = SearchFilters.model_validate(
            {"memory_type": memory_type, "since": since, "until": until, "session_id": session}
        )
    except ValueError as exc:
        fail(str(exc))
    items = memory().get_all(user_id=user, filters=filters)
    if as_json:
        emit_json(items)
    elif not items:
        narrowed = any(v is not None for v in (memory_type, since, until, session))
        out.print(f"no memories for user {user!r}{' that match' if narrowed else ''}", markup=False)
    else:
        out.print(memories_table(items, escape(f"memories of {user}")))


@app.command()
def history(memory_id: str = MemoryArg, as_json: bool = JsonFlag) -> None:
    """Every version of one memory: add, updates, delete."""
    mem = memory()
    full = _full_memory_id(mem, memory_id)
    rows = mem.history(full)
    if not rows:
        fail(f"no history for {full!r}", 1)
    if as_json:
        emit_json(rows)
        return
    table = Table(title=escape(f"history of {full}"))
    for col in ("at", "op", "session", "by", "content"):
        table.add_column(col, overflow="fold")
    for h in rows:
        table.add_row(
            h.at.strftime("%Y-%m-%d %H:%M"),
            h.op,
            escape(h.session_id or ""),
            h.actor,
            escape(h.new_content or h.old_content or ""),
        )
    out.print(table)


@app.command()
def sessions(
    user: str | None = typer.Option(
        None, "--user", "-u", help="Only this user's sessions (default: all).", callback=_user_id
    ),
    status: str | None = typer.Option(
        None,
        "--status",
        callback=_one_of(get_args(SessionStatus)),
        help=f"Only the sessions of this status: {' | '.join(get_args(SessionStatus))} "
        "(deferred: added with --no-infer, waiting for `deltamem resume`).",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """The session log."""
    rows = memory().store.list_sessions(user, status)  # type: ignore[arg-type]
    if as_json:
        emit_json([r.model_dump(mode="json", exclude={"messages"}) for r in rows])
        return
    if not rows:
        whose = f" for user {user!r}" if user is not None else ""
        out.print(f"no {status + ' ' if status else ''}sessions{whose}", markup=False)
        return
    table = Table(title="session log")
    for col in ("seq", "user", "session", "date", "turns", "status", "error"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            str(r.seq),
            escape(r.user_id),
            escape(r.session_id),
            r.timestamp.strftime("%Y-%m-%d"),
            str(len(r.messages)),
            r.status,
            escape(r.error or ""),
        )
    out.print(table)


# --- set-up, demo, service, bench -----------------------------------------------------
@app.command()
def rules(
    stage: str | None = typer.Option(
        None, help="Only this stage's rules: fact, session, decide, context or answer."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """The rules of the write and read paths, in the order they run: code, stage,
    effect, languages and what each refuses or rewrites (switch one off with
    ManagerConfig(rules=RuleSettings(off={...})); figures in docs/rules.md)."""
    import json

    from deltamem.rules import all_rules

    shown = [r for r in all_rules() if stage is None or r.stage == stage]
    if not shown:
        typer.echo(f"no rules of stage {stage!r}", err=True)
        raise typer.Exit(2)
    rows = [
        {
            "code": r.code,
            "stage": r.stage,
            "effect": r.effect,
            "languages": sorted(r.languages) if r.languages else "any",
            "thresholds": dict(r.thresholds),
            "summary": r.summary,
        }
        for r in shown
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        langs = ",".join(row["languages"]) if isinstance(row["languages"], list) else "any"
        typer.echo(
            f"{row['code']:<22} {row['stage']:<8} {row['effect']:<10} {langs:<12} {row['summary']}"
        )


@app.command()
def setup() -> None:
    """Assemble and verify the embedded model, and load the embedder once."""
    from deltamem.embed import make_embedder
    from deltamem.llm import weights

    path = weights.assemble()
    err.print(f"model: {path} ({path.stat().st_size:,} bytes, sha256 verified on assembly)")
    emb = make_embedder("local")
    err.print(f"embedder: {emb.name} ({emb.dim}-d)")


@app.command()
def demo() -> None:
    """Ingest the built-in sample conversation and show what memory makes of it."""
    from deltamem.cli.demo import run_demo

    run_demo(OPTS.db, OPTS.llm_config, out)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8000, help="The port to listen on."),
    keys: str | None = typer.Option(
        None, "--keys", help="key1=tenantA,key2=tenantB or @file (else DELTAMEM_API_KEYS)"
    ),
    concurrency: int = ConcurrencyOpt,
    sweep_every: str | None = SweepOpt,
) -> None:
    """REST API and the memory inspector (/ui) with a background worker, on the
    embedded defaults."""
    from deltamem.server import serve as run

    run(
        host=host,
        port=port,
        memory_path=OPTS.db,
        llm_spec=OPTS.llm_config,
        keys=keys,
        embedder_spec=OPTS.embedder,
        worker_settings=WorkerSettings(concurrency=concurrency, sweep_every=_secs(sweep_every)),
    )


@app.command()
def ui(
    port: int = typer.Option(8765, "--port", "-p", help="The port to listen on."),
    keys: str | None = typer.Option(
        None, "--keys", help="Also let these API keys in (and open the REST API to them)."
    ),
    with_worker: bool = typer.Option(
        True,
        "--worker/--no-worker",
        help="Process pending sessions and retries asked from the inspector (loads the LLM "
        "only when there is such work); --no-worker only looks.",
    ),
    browser: bool = typer.Option(True, "--browser/--no-browser", help="Open a browser tab."),
) -> None:
    """The memory inspector on the local store, in your browser: facts, their history
    and sources, sessions and their LLM calls; edit, delete, retry. Listens on
    127.0.0.1 only; no API key is needed from this machine."""
    from deltamem.server import serve_ui as run

    run(
        port=port,
        memory_path=OPTS.db,
        llm_spec=OPTS.llm_config,
        keys=keys,
        embedder_spec=OPTS.embedder,
        start_worker=with_worker,
        open_browser=browser,
    )


@app.command()
def worker(
    once: bool = typer.Option(False, "--once", help="Process what is pending, then exit."),
    concurrency: int = ConcurrencyOpt,
    sweep_every: str | None = SweepOpt,
) -> None:
    """An extra worker on a shared store (SQLite file or PostgreSQL URL): run as many
    as you like, in as many processes or machines; they share the session log."""
    from deltamem.server import work

    handled = work(
        OPTS.db,
        OPTS.llm_config,
        embedder_spec=OPTS.embedder,
        once=once,
        worker_settings=WorkerSettings(concurrency=concurrency, sweep_every=_secs(sweep_every)),
    )
    if once:
        typer.echo(f"{handled} session(s) handled")


@app.command()
def mcp(
    transport: str = typer.Option(
        "stdio",
        help="stdio (for a desktop agent that starts the server) | streamable-http (listens "
        "on --host and --port).",
    ),
    host: str = typer.Option("127.0.0.1", help="The address to listen on (streamable-http)."),
    port: int = typer.Option(8001, help="The port to listen on (streamable-http)."),
    keys: str | None = typer.Option(
        None,
        "--keys",
        help="key1=tenantA,key2=tenantB or @file (else DELTAMEM_API_KEYS): the API keys "
        "streamable-http accepts, each scoped to its tenant (stdio needs none).",
    ),
    concurrency: int = ConcurrencyOpt,
) -> None:
    """MCP server (stdio for desktop agents, or streamable HTTP)."""
    from deltamem.server import serve_mcp

    serve_mcp(
        transport,
        OPTS.db,
        OPTS.llm_config,
        host=host,
        port=port,
        keys=keys,
        embedder_spec=OPTS.embedder,
        worker_settings=WorkerSettings(concurrency=concurrency),
    )


def _mount_train() -> None:
    try:
        import scipy  # noqa: F401  (the state distance's assignment; bench extra)
    except ImportError:
        return
    from deltamem.cli.diff import diff
    from deltamem.cli.synth import synth
    from deltamem.cli.train import app as train_app

    app.command()(diff)
    app.command()(synth)
    app.add_typer(train_app, name="train")


def _mount_bench() -> None:
    try:
        from deltamem.bench.cli import app as bench_app
    except ImportError:  # the bench extra (scipy) is not installed
        return
    app.add_typer(bench_app, name="bench", help="Benchmarks: HaluMem, LoCoMo.")


_mount_bench()
_mount_train()
