"""The `deltamem` app, its global options and what every command shares."""

from __future__ import annotations

from typing import Any

import typer

from deltamem.cli.options import OPTS
from deltamem.cli.render import fail
from deltamem.expiry import parse_duration
from deltamem.ids import MAX_ID_CHARS, MAX_USER_ID_CHARS, id_fault
from deltamem.memory import Memory
from deltamem.server.config import WorkerSettings
from deltamem.store.base import AmbiguousMemoryId, UnknownMemory

app = typer.Typer(
    help="Long-term memory for LLM agents that stays right as facts change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


JsonFlag = typer.Option(False, "--json", help="Print JSON instead of tables.")


def id_param(what: str, max_chars: int = MAX_ID_CHARS) -> Any:
    """A typer callback holding an id to the grammar of `deltamem.ids` (exit code 2)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        fault = id_fault(value, max_chars)
        if fault is not None:
            raise typer.BadParameter(f"{what} {fault}")
        return value

    return check


def one_of(choices: tuple[str, ...]) -> Any:
    """A typer callback that takes one of `choices` (exit code 2 for another value)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


check_user_id = id_param("user_id", MAX_USER_ID_CHARS)
UserOpt = typer.Option(
    ..., "--user", "-u", help="The user whose memory this is.", callback=check_user_id
)
# the user of a file's sessions that name none (`add`, `import-sessions`)
SessionUserOpt = typer.Option(
    None, "--user", "-u", help="User for sessions without one.", callback=check_user_id
)
SessionArg = typer.Argument(
    ...,
    help="The session's id, as `deltamem sessions` lists it.",
    callback=id_param("session_id"),
)
# which user's sessions a command goes through (`resume`, `sessions`)
SessionsOfUserOpt = typer.Option(
    None,
    "--user",
    "-u",
    help="Only this user's sessions (default: all).",
    callback=check_user_id,
)
MemoryArg = typer.Argument(
    ...,
    callback=id_param("memory_id"),
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


def duration_seconds(value: str | None) -> float | None:
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


def full_memory_id(mem: Memory, given: str, *, deleted: bool = True) -> str:
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
