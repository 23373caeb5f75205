"""MCP server: the tools, called in-process through the SDK's client, return results
scoped by tenant and user; the HTTP transport refuses requests without a key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import SESSION, ScriptedLLM
from mcp import Client
from test_api import responder

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.server.config import WorkerSettings
from deltamem.server.mcp_server import McpKeyGuard, create_mcp_server
from deltamem.server.scope import internal_user
from deltamem.server.worker import Worker
from deltamem.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio
FAST = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    store = SQLiteStore(tmp_path / "mcp.db", dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(default=responder), embedder=embedder, store=store, config=SESSION)
    yield mem
    mem.close()


def convo(*words: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Remember codeword={w}."} for w in words] + [
        {"role": "assistant", "content": "Will do."}
    ]


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_tools_remember_search_answer_list_history(memory: Memory) -> None:
    server = create_mcp_server(memory, tenant="acme", worker=Worker(memory, FAST))
    async with Client(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "search", "answer", "list_memories", "memory_history"} <= names
        assert not any("delete" in n or "forget" in n or "reset" in n for n in names)

        done = await call(
            client,
            "remember",
            messages=convo("otter", "heron"),
            user_id="martin",
            session_id="s1",
            timestamp="2029-02-13T10:51:39",
            wait=True,
        )
        assert done["status"] == "applied"
        assert len([o for o in done["operations"] if o["op"] == "add"]) == 2

        hits = (await call(client, "search", query="otter", user_id="martin", limit=5))["results"]
        assert hits and "otter" in hits[0]["content"]
        full = await call(client, "search", query="otter", user_id="martin", verbose=True)
        assert all(h["memory"]["user_id"] == "martin" for h in full["results"])

        listing = await call(client, "list_memories", user_id="martin")
        assert listing["count"] == 2
        mid = listing["memories"][0]["id"]
        hist = await call(client, "memory_history", memory_id=mid)
        assert [h["op"] for h in hist["history"]] == ["add"]

        ans = await call(client, "answer", question="Which codewords?", user_id="martin")
        assert "otter" in ans["answer"] and "heron" in ans["answer"]

        status = await call(client, "job_status", job_id=done["job_id"])
        assert status["status"] == "applied"
    assert memory.store.count(internal_user("acme", "martin")) == 2


async def test_tools_are_scoped_by_tenant_and_user(memory: Memory) -> None:
    worker = Worker(memory, FAST)
    a = create_mcp_server(memory, tenant="a", worker=worker)
    b = create_mcp_server(memory, tenant="b", worker=worker)
    async with Client(a) as ca, Client(b) as cb:
        await call(ca, "remember", messages=convo("secreta"), user_id="u", wait=True)
        await call(ca, "remember", messages=convo("otheruser"), user_id="v", wait=True)
        await call(cb, "remember", messages=convo("secretb"), user_id="u", wait=True)

        for client, own in ((ca, "secreta"), (cb, "secretb")):
            listing = await call(client, "list_memories", user_id="u")
            assert [m["content"] for m in listing["memories"]] == [f"The user's codeword is {own}."]
            hits = await call(client, "search", query="secreta secretb otheruser", user_id="u")
            assert {(h["kind"], h["content"]) for h in hits["results"]} == {
                ("fact", f"The user's codeword is {own}."),
                ("episode", f"user: Remember codeword={own}."),  # the raw turns, theirs only
                ("episode", "assistant: Will do."),
            }
            ans = await call(client, "answer", question="codewords?", user_id="u")
            assert ans["answer"].split()[1:] == [own]

        a_id = (await call(ca, "list_memories", user_id="u"))["memories"][0]["id"]
        refused = await cb.call_tool("memory_history", {"memory_id": a_id})
        assert refused.is_error and "no memory" in refused.content[0].text
        # job ids resolve under the caller's tenant only
        job = (await call(ca, "remember", messages=convo("secreta"), user_id="u"))["job_id"]
        assert (await cb.call_tool("job_status", {"job_id": job})).is_error


async def test_search_hits_are_compact_unless_verbose(memory: Memory) -> None:
    """An agent pays for every token of a tool result: by default a hit is its content,
    kind, date and id, and the text is JSON on one line; verbose=true gives the full
    record (user, agent, session, turns, created/updated, version) and the score."""
    server = create_mcp_server(memory, tenant="acme", worker=Worker(memory, FAST))
    async with Client(server) as client:
        await call(
            client,
            "remember",
            messages=convo("otter"),
            user_id="martin",
            timestamp="2029-02-13T10:51:39",
            wait=True,
        )
        result = await client.call_tool("search", {"query": "otter", "user_id": "martin"})
        assert not result.is_error and result.structured_content is not None
        hits = result.structured_content["results"]
        fact = next(h for h in hits if h["kind"] == "fact")
        assert fact == {
            "content": "The user's codeword is otter.",
            "kind": "fact",
            "date": "2029-02-13",
            "id": memory.get_all(user_id=internal_user("acme", "martin"))[0].id,
        }
        assert all(set(h) == {"content", "kind", "date", "id"} for h in hits)
        [text] = result.content
        assert text.type == "text" and "\n" not in text.text  # type: ignore[union-attr]
        assert json.loads(text.text) == result.structured_content  # type: ignore[union-attr]
        for field in ("created_at", "updated_at", "version", "score"):
            assert field not in text.text  # type: ignore[union-attr]
        # the id is the one memory_history takes
        hist = await call(client, "memory_history", memory_id=fact["id"])
        assert [h["op"] for h in hist["history"]] == ["add"]

        verbose = await call(client, "search", query="otter", user_id="martin", verbose=True)
        full = next(h for h in verbose["results"] if h["kind"] == "fact")
        assert full["memory"]["id"] == fact["id"] and full["score"] > 0
        assert {"created_at", "updated_at", "version", "session_id"} <= set(full["memory"])


async def test_a_conflict_names_the_callers_user_not_the_tenant_scoped_one(
    memory: Memory,
) -> None:
    server = create_mcp_server(memory, tenant="acme", worker=Worker(memory, FAST))
    async with Client(server) as client:
        await call(client, "remember", messages=convo("otter"), user_id="martin", session_id="s1")
        clash = await client.call_tool(
            "remember", {"messages": convo("heron"), "user_id": "martin", "session_id": "s1"}
        )
        assert clash.is_error
        text = clash.content[0].text
        assert "session 's1' of user 'martin' is already logged" in text
        assert "acme:" not in text


async def test_remember_queues_for_the_worker_and_refuses_bad_input(memory: Memory) -> None:
    worker = Worker(memory, FAST)
    server = create_mcp_server(memory, worker=worker)
    async with Client(server) as client:
        queued = await call(client, "remember", messages=convo("lynx"), user_id="u")
        assert queued["status"] == "pending"
        worker.start()
        try:
            assert worker.wait_idle(10)
        finally:
            worker.stop()
        assert (await call(client, "job_status", job_id=queued["job_id"]))["status"] == "applied"

        for bad in (
            {"messages": [], "user_id": "u"},
            {"messages": [{"role": "robot", "content": "x"}], "user_id": "u"},
            {"messages": convo("x"), "user_id": ""},
            {"messages": convo("x"), "user_id": "u", "timestamp": "whenever"},
            {"messages": "hello", "user_id": "u"},
        ):
            result = await client.call_tool("remember", bad)
            assert result.is_error, bad
        missing = await client.call_tool("memory_history", {"memory_id": "nope"})
        assert missing.is_error
    assert len(memory.store.list_sessions()) == 1


async def test_streamable_http_requires_an_api_key(memory: Memory) -> None:
    keys = {"mcp-key-0123456789abcdef": "acme"}
    server = create_mcp_server(memory, keys=keys)
    app = McpKeyGuard(server.streamable_http_app(), keys)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        r = await client.post("/mcp", content=json.dumps(init))
        assert r.status_code == 401
        assert r.headers["content-type"] == "application/problem+json"
        r = await client.post("/mcp", content=json.dumps(init), headers={"X-API-Key": "wrong"})
        assert r.status_code == 401


async def test_streamable_http_scopes_each_request_by_its_key(memory: Memory) -> None:
    """A real HTTP round trip (uvicorn on a free port): the tenant is the key's."""
    import socket
    import threading

    import httpx2
    import uvicorn
    from mcp.client.streamable_http import streamable_http_client

    keys = {"key-a-0123456789abcdef": "a", "key-b-0123456789abcdef": "b"}
    server = create_mcp_server(memory, keys=keys, worker=Worker(memory, FAST))
    app = McpKeyGuard(server.streamable_http_app(), keys)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=web.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        import anyio

        with anyio.fail_after(10):
            while not web.started:
                await anyio.sleep(0.02)
        for key, tenant in keys.items():
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=10)
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await call(
                    client, "remember", messages=convo(f"http{tenant}"), user_id="u", wait=True
                )
                listing = await call(client, "list_memories", user_id="u")
                assert [m["content"] for m in listing["memories"]] == [
                    f"The user's codeword is http{tenant}."
                ]
        assert sorted(s.user_id for s in memory.store.list_sessions()) == ["a:u", "b:u"]
    finally:
        web.should_exit = True
        thread.join(10)


def test_stdio_transport_serves_the_tools(tmp_path: Path) -> None:
    """`serve_mcp("stdio")` in a subprocess, driven by the SDK's stdio client."""
    import os
    import sys

    import anyio
    from mcp import StdioServerParameters

    code = (
        "from deltamem.server import serve_mcp; "
        f"serve_mcp('stdio', {str(tmp_path / 'stdio.db')!r}, 'http://127.0.0.1:9/v1#none', "
        "tenant='local', log_level='warning')"
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-c", code], env={**os.environ, "DELTAMEM_LLM": ""}
    )

    async def main() -> None:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "remember" in names
            listing = await call(client, "list_memories", user_id="nobody")
            assert listing == {"user_id": "nobody", "count": 0, "memories": []}

    anyio.run(main)


@pytest.mark.parametrize(
    ("tool", "args", "fault"),
    [
        ("remember", {"user_id": "team/alice"}, "user_id contains '/'"),
        ("remember", {"user_id": "u", "session_id": "a\x00b"}, "session_id contains a control"),
        ("remember", {"user_id": "u", "agent_id": ".."}, "agent_id cannot be '..'"),
        ("list_memories", {"user_id": "a\x1bb"}, "user_id contains a control"),
        ("memory_history", {"memory_id": "a\x00b"}, "memory_id contains a control"),
    ],
)
async def test_tools_refuse_ids_outside_the_grammar(
    memory: Memory, tool: str, args: dict[str, Any], fault: str
) -> None:
    """The id grammar of deltamem/ids.py, as a tool error naming the fault."""
    server = create_mcp_server(memory, tenant="acme", worker=Worker(memory, FAST))
    if tool == "remember":
        args = {"messages": convo("otter"), **args}
    async with Client(server) as client:
        result = await client.call_tool(tool, args)
    assert result.is_error
    assert fault in json.dumps([c.model_dump() for c in result.content])
    assert memory.store.list_sessions() == []
