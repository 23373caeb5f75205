"""Test doubles. A scripted LLM stands in for the model where a test is about the
code around it; every path also has a test with the real engine."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from deltamem.llm.base import LLM, ChatMessage, Completion

Reply = str | dict[str, Any] | Exception | Callable[[list[ChatMessage]], Any]


class ScriptedLLM(LLM):
    """Answers from a script, in order; records every request it receives."""

    name = "scripted"

    def __init__(self, replies: list[Reply] | None = None, *, default: Reply | None = None,
                 retries: int = 1) -> None:
        super().__init__(timeout=5.0, retries=retries)
        self.replies = list(replies or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def _chat(self, messages, *, schema, max_tokens, temperature, timeout) -> Completion:
        self.requests.append({"messages": messages, "schema": schema})
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError("ScriptedLLM ran out of replies")
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(messages)
        if isinstance(reply, Exception):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt = sum(len(m["content"]) for m in messages) // 4
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=len(text) // 4)


def ops(*items: dict[str, Any]) -> dict[str, Any]:
    return {"operations": list(items)}


def add(content: str, type_: str = "persona") -> dict[str, Any]:
    return {"op": "add", "type": type_, "content": content}


def update(short_id: str, content: str, type_: str = "persona") -> dict[str, Any]:
    return {"op": "update", "id": short_id, "type": type_, "content": content}
