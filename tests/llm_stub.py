"""An OpenAI-compatible chat server on loopback whose answers a test decides: a
reply of any shape, or no answer at all (it reads the request and holds the
connection open until the stub is closed) — what a hung model looks like to the
HTTP client. Real sockets, so the code under test makes real HTTP calls with its
real timeouts.

    with LLMStub(lambda prompt: {"operations": []}) as llm:
        Memory(llm=llm.spec, ...)
    with LLMStub(hang=lambda prompt: "codeword=slow" in prompt) as llm: ...
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str], Any]  # last prompt -> reply (dict: JSON-encoded, str: as is)


class LLMStub:
    def __init__(
        self,
        answer: Answer | None = None,
        *,
        hang: Callable[[str], bool] | bool = False,
    ) -> None:
        self.answer = answer or (lambda _prompt: {"operations": []})
        self.hang = hang if callable(hang) else (lambda _prompt, h=hang: h)
        self.calls: list[str] = []  # the last prompt of every request, in arrival order
        self.hanging = 0  # requests now held without an answer
        self._release = threading.Event()
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
                with stub._lock:
                    stub.calls.append(prompt)
                if stub.hang(prompt):
                    with stub._lock:
                        stub.hanging += 1
                    stub._release.wait()  # never answers; the connection stays open
                    return
                reply = stub.answer(prompt)
                text = reply if isinstance(reply, str) else json.dumps(reply)
                out = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 5},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def spec(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1#stub"

    def close(self) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> LLMStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
