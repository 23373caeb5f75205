"""deltamem's LLM and embedder behind an OpenAI-compatible HTTP API on loopback.

Third-party memory systems (mem0) speak the OpenAI API. Pointed here, they run
on the very model and embeddings deltamem uses, in the same process, and every
call they make lands in the LLM's usage and call log like deltamem's own, so a
benchmark can compare their cost with ours. Three routes: ``POST
/v1/chat/completions`` (``response_format`` json_object / json_schema decode
under a JSON grammar), ``POST /v1/embeddings``, ``GET /v1/models``. No
streaming, no tools: what the systems we compare with call.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from deltamem.embed import Embedder
from deltamem.llm.base import LLM, LLMError, free_layout

ANY_OBJECT: dict[str, Any] = {"type": "object"}


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # tools, top_p, ...: accepted, not used

    model: str = ""
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    response_format: dict[str, Any] | None = None


class EmbeddingsIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = ""
    input: str | list[str]


def _text(content: Any) -> str:
    """Message content as text (OpenAI allows a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema to decode under, marked free-layout: OpenAI's JSON modes let the
    model indent, and clients' prompts show indented JSON."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return free_layout(ANY_OBJECT)
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        return free_layout(spec.get("schema") or ANY_OBJECT)
    return None


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def create_openai_app(llm: LLM, embedder: Embedder, *, purpose: str = "openai-api") -> FastAPI:
    """`purpose` labels the calls in the LLM's usage and call log."""
    app = FastAPI(title="deltamem OpenAI-compatible API")

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": llm.name, "object": "model"}]}

    @app.post("/v1/chat/completions", response_model=None)
    def chat(body: ChatIn) -> dict[str, Any] | JSONResponse:
        messages = [
            {"role": str(m.get("role", "user")), "content": _text(m.get("content"))}
            for m in body.messages
        ]
        max_tokens = body.max_completion_tokens or body.max_tokens or 1024
        temperature = body.temperature or 0.0
        schema = _schema(body.response_format)
        before = llm.usage.snapshot()
        try:
            if schema is not None:
                text = json.dumps(
                    llm.complete_json(
                        messages,
                        schema,
                        purpose=purpose,
                        max_tokens=max_tokens,
                        temperature=temperature,
                    ),
                    ensure_ascii=False,
                )
            else:
                text = llm.complete(
                    messages, purpose=purpose, max_tokens=max_tokens, temperature=temperature
                )
        except LLMError as exc:
            return _error(502, f"{type(exc).__name__}: {exc}", "llm_error")
        used = llm.usage.since(before)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": llm.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": used.prompt_tokens,
                "completion_tokens": used.completion_tokens,
                "total_tokens": used.prompt_tokens + used.completion_tokens,
            },
        }

    @app.post("/v1/embeddings")
    def embeddings(body: EmbeddingsIn) -> dict[str, Any]:
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        vectors: Iterable[Any] = embedder.embed(texts) if texts else []
        return {
            "object": "list",
            "model": embedder.name,
            "data": [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LoopbackOpenAI:
    """The app above, served by uvicorn in a background thread on 127.0.0.1."""

    def __init__(self, llm: LLM, embedder: Embedder, *, purpose: str = "openai-api") -> None:
        import uvicorn

        self.port = _free_port()
        config = uvicorn.Config(
            create_openai_app(llm, embedder, purpose=purpose),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="openai-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback OpenAI-compatible server did not start")
            time.sleep(0.02)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
