"""Entry points the CLI calls: `serve` (REST API + inspector + worker), `serve_ui` (the
inspector on a local store), `serve_mcp` (MCP server + worker) and `work`, all on the
embedded defaults unless told otherwise."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from deltamem.llm.factory import LLMConfig
from deltamem.memory import Memory
from deltamem.server.config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TENANT,
    WorkerSettings,
    keys_or_generated,
    load_keys,
)

KeySpec = Mapping[str, str] | str | Path | None
LLMSpec = LLMConfig | str | None
SHUTDOWN_GRACE = 3  # seconds open requests get after SIGTERM


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    memory_path: str | Path | None = None,
    llm_spec: LLMSpec = None,
    keys: KeySpec = None,
    *,
    embedder_spec: str | None = None,
    log_level: str = "info",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    worker_settings: WorkerSettings | None = None,
) -> None:
    """Run the REST API, the memory inspector (at /ui) and the worker until interrupted.

    `keys`: a key → tenant mapping, a ``"key=tenant,..."`` string, or a file path
    (``@path`` or a plain path); None reads $DELTAMEM_API_KEYS /
    $DELTAMEM_API_KEYS_FILE, and failing those one key is generated and printed.
    `llm_spec` / `embedder_spec` as in `make_llm` / `make_embedder` (None: the
    embedded defaults; the LLM loads on the first session or answer).
    """
    import uvicorn

    from deltamem.server.app import create_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    resolved = keys_or_generated(keys)
    memory = Memory(memory_path, llm=llm_spec, embedder=embedder_spec)
    try:
        app = create_app(
            memory, resolved, max_body_bytes=max_body_bytes, worker_settings=worker_settings
        )
        # a request still waiting on the LLM (an answer) must not hold a SIGTERM up
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level.lower(),
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
    finally:
        memory.close()


def serve_ui(
    port: int = 8765,
    memory_path: str | Path | None = None,
    llm_spec: LLMSpec = None,
    keys: KeySpec = None,
    *,
    embedder_spec: str | None = None,
    log_level: str = "warning",
    worker_settings: WorkerSettings | None = None,
    start_worker: bool = True,
    open_browser: bool = True,
) -> None:
    """The memory inspector on a local store, at http://127.0.0.1:PORT/ui, until
    interrupted. It listens on the loopback interface only, and a browser of this
    machine needs no API key there: it sees every user of the store, by their stored
    ids. Configured keys (as for `serve`) still work, scoped to their tenant, and open
    the REST API beside it; with none configured the REST API stays closed. The
    worker (`start_worker`) processes what is pending and what is retried from the
    inspector; the LLM is loaded only if there is such work."""
    import sys
    import threading
    import webbrowser

    import uvicorn

    from deltamem.server.app import create_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    resolved = load_keys(keys)
    memory = Memory(memory_path, llm=llm_spec, embedder=embedder_spec)
    try:
        app = create_app(
            memory,
            resolved,
            worker_settings=worker_settings,
            start_worker=start_worker,
            ui_local=True,
        )
        url = f"http://127.0.0.1:{port}/ui/users"
        print(f"deltamem inspector: {url}  (Ctrl+C stops it)", file=sys.stderr, flush=True)
        if open_browser:
            threading.Timer(1.0, webbrowser.open, args=(url,)).start()
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            log_level=log_level.lower(),
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
    finally:
        memory.close()


def serve_mcp(
    transport: str = "stdio",  # checked below: stdio, streamable-http (or http)
    memory_path: str | Path | None = None,
    llm_spec: LLMSpec = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8001,
    path: str = "/mcp",
    tenant: str = DEFAULT_TENANT,
    keys: KeySpec = None,
    embedder_spec: str | None = None,
    log_level: str = "info",
    worker_settings: WorkerSettings | None = None,
) -> None:
    """Run the MCP server and its worker until interrupted.

    stdio: one local client, tenant `tenant`; nothing but the protocol is written
    to stdout. streamable-http: at http://host:port{path}; each request needs an
    API key (as for `serve`) and is scoped to its tenant.
    """
    import anyio

    from deltamem.server.mcp_server import McpKeyGuard, create_mcp_server
    from deltamem.server.worker import Worker

    # logs go to stderr: over stdio, stdout carries the protocol
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    transport = {"http": "streamable-http", "streamable_http": "streamable-http"}.get(
        transport, transport
    )
    if transport not in ("stdio", "streamable-http"):
        raise ValueError(f"unknown MCP transport {transport!r}: use stdio or streamable-http")
    memory = Memory(memory_path, llm=llm_spec, embedder=embedder_spec)
    worker = Worker(memory, worker_settings)
    try:
        if transport == "stdio":
            server = create_mcp_server(memory, tenant=tenant, worker=worker)
            worker.start()
            anyio.run(server.run_stdio_async)
        else:
            import uvicorn

            resolved = keys_or_generated(keys)
            server = create_mcp_server(memory, tenant=tenant, keys=resolved, worker=worker)
            app = McpKeyGuard(
                server.streamable_http_app(streamable_http_path=path, host=host), resolved
            )
            worker.start()
            uvicorn.run(
                app,
                host=host,
                port=port,
                log_level=log_level.lower(),
                timeout_graceful_shutdown=SHUTDOWN_GRACE,
            )
    finally:
        worker.stop()
        memory.close()


def work(
    memory_path: str | Path | None = None,
    llm_spec: LLMSpec = None,
    *,
    embedder_spec: str | None = None,
    log_level: str = "info",
    worker_settings: WorkerSettings | None = None,
    once: bool = False,
) -> int:
    """Run one more worker on a shared store until SIGINT / SIGTERM (then it stops
    within `stop_grace` seconds, leaving a session still in an LLM call pending for
    the next worker), or with `once` until nothing is pending. Workers in any
    number of processes share the store's session log as their queue; user leases
    keep them from planning the same user at once. Returns the sessions handled."""
    import signal
    import threading

    from deltamem.server.worker import Worker

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    memory = Memory(memory_path, llm=llm_spec, embedder=embedder_spec)
    worker = Worker(memory, worker_settings)
    try:
        if once:
            handled = worker.run_once()
            if worker.settings.sweep_every:
                worker.sweep()
            return handled
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        worker.start()
        logging.getLogger("deltamem.worker").info("worker %s started", worker.owner)
        stop.wait()
        worker.stop()
        return worker.stats.applied + worker.stats.failed
    finally:
        memory.close()
