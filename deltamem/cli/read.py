"""`deltamem` commands that read: search, answer, memories, history, sessions, rules."""

from __future__ import annotations

from typing import get_args

import typer
from rich.markup import escape
from rich.table import Table

from deltamem.cli.base import (
    JsonFlag,
    MemoryArg,
    SessionsOfUserOpt,
    UserOpt,
    app,
    full_memory_id,
    memory,
    one_of,
)
from deltamem.cli.render import emit_json, fail, hits_table, memories_table, out
from deltamem.types import MemoryType, SearchFilters, SessionStatus


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
    full = full_memory_id(mem, memory_id)
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
    user: str | None = SessionsOfUserOpt,
    status: str | None = typer.Option(
        None,
        "--status",
        callback=one_of(get_args(SessionStatus)),
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
    import math

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
            # a floor of minus infinity (a rule off by default) is null: JSON has no -inf
            "thresholds": {k: v if math.isfinite(v) else None for k, v in r.thresholds.items()},
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
