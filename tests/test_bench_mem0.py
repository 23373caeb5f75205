"""The real mem0 package (`mem0ai`) as a benchmark system, on a scripted LLM and
the real embedder served through the loopback OpenAI-compatible endpoint."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import ScriptedLLM

from deltamem.embed import Embedder
from deltamem.llm.base import LLMTimeout, free_layout
from deltamem.server.openai_compat import LoopbackOpenAI

os.environ.setdefault("MEM0_TELEMETRY", "False")
pytest.importorskip("mem0", reason="the mem0 extra is not installed")

from deltamem.bench.systems import make_system

LIKES = re.compile(r"I like (\w+)")


def extractor(messages: list[dict[str, str]]) -> Any:
    """mem0's extraction call: one memory per 'I like X' among the NEW messages."""
    prompt = messages[-1]["content"]
    new = prompt.split("## New Messages", 1)[1].split("## Observation Date", 1)[0]
    return {
        "memory": [
            {"id": str(i), "text": f"User likes {x}."} for i, x in enumerate(LIKES.findall(new))
        ]
    }


def chat(*lines: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": line} for line in lines]


def test_loopback_endpoint_speaks_openai(embedder: Embedder) -> None:
    llm = ScriptedLLM(replies=[{"answer": 42}, "plain text"])
    server = LoopbackOpenAI(llm, embedder, purpose="third-party")
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            r = client.post(
                "/chat/completions",
                json={
                    "model": "x",
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                    "response_format": {"type": "json_object"},
                },
            )
            assert r.status_code == 200
            body = r.json()
            assert body["choices"][0]["message"]["content"] == '{"answer": 42}'
            assert body["usage"]["prompt_tokens"] >= 0
            # decoded under JSON, in any layout as OpenAI's json_object allows
            assert llm.requests[0]["schema"] == free_layout({"type": "object"})
            assert llm.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
            r = client.post(
                "/chat/completions", json={"messages": [{"role": "user", "content": "q"}]}
            )
            assert r.json()["choices"][0]["message"]["content"] == "plain text"
            assert llm.requests[1]["schema"] is None
            r = client.post("/embeddings", json={"model": "m", "input": ["tea", "coffee"]})
            data = r.json()["data"]
            assert [d["index"] for d in data] == [0, 1]
            assert len(data[0]["embedding"]) == embedder.dim
            assert data[0]["embedding"] == pytest.approx(
                embedder.embed(["tea"])[0].tolist(), abs=1e-5
            )
            # the model failing is a 502 with an OpenAI-style error, not a crash
            llm.push(RuntimeError("boom"))
            r = client.post(
                "/chat/completions", json={"messages": [{"role": "user", "content": "q"}]}
            )
            assert r.status_code in (500, 502)
        assert llm.usage.by_purpose.get("third-party", 0) >= 2
    finally:
        server.close()


def test_mem0_adds_searches_counts_and_resumes(tmp_path: Path, embedder: Embedder) -> None:
    llm = ScriptedLLM(default=extractor)
    system = make_system("mem0", llm, embedder, tmp_path)
    try:
        system.reset("alice")
        system.add_session("alice", "s1", chat("I like tea", "and I like chess"), None)
        system.add_session("alice", "s2", chat("Lately I like rowing"), None)
        system.add_session("bob", "s1", chat("I like jazz"), None)
        assert sorted(system.get_session_memories("alice", "s1")) == [
            "User likes chess.",
            "User likes tea.",
        ]
        assert system.get_session_memories("alice", "s2") == ["User likes rowing."]
        hits = system.search_retrieved("alice", "Does the user go rowing on the river?", 10)
        assert {h.text for h in hits} == {
            "User likes tea.",
            "User likes chess.",
            "User likes rowing.",
        }
        assert hits[0].text == "User likes rowing."
        assert {h.session_id for h in hits} == {"s1", "s2"}
        assert system.search("bob", "music", 10) == ["User likes jazz."]
        # one extraction call per session, all through the loopback endpoint
        assert system.cost.llm_calls == 3 and len(llm.requests) == 3
        assert llm.usage.by_purpose == {"mem0": 3}
    finally:
        system.close()
    # a resumed run: sessions already added are not added (nor paid for) again
    again = make_system("mem0", llm, embedder, tmp_path)
    try:
        again.add_session("alice", "s1", chat("I like tea", "and I like chess"), None)
        assert len(llm.requests) == 3 and again.cost.llm_calls == 0
        assert len(again.search("alice", "tea", 10)) == 3  # no duplicates
        again.reset("alice")
        assert again.search("alice", "tea", 10) == []
        assert again.search("bob", "music", 10) == ["User likes jazz."]
    finally:
        again.close()


def test_mem0_client_waits_for_the_model_and_does_not_resend(
    tmp_path: Path, embedder: Embedder
) -> None:
    llm = ScriptedLLM(default=extractor)
    llm.timeout, llm.retries = 900.0, 0
    system = make_system("mem0", llm, embedder, tmp_path)
    try:
        client = system.mem0.llm.client
        assert client.max_retries == 0 and client.timeout >= 900.0  # not the stock 600 s
        llm.push(LLMTimeout("generation exceeded 900s"))  # the loopback answers 502
        with pytest.raises(Exception, match=r"502.*generation exceeded 900s"):
            system.add_session("alice", "s1", chat("I like tea"), None)
        assert len(llm.requests) == 1  # asked once: the client did not send it again
        assert system.search("alice", "tea", 10) == []  # nothing half-written
        system.add_session("alice", "s1", chat("I like tea"), None)  # and it can go on
        assert system.search("alice", "tea", 10) == ["User likes tea."]
    finally:
        system.close()
