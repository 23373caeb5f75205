"""Any OpenAI-compatible chat server: OpenAI, vLLM, Ollama, LM Studio, llama.cpp server."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from deltamem.llm.base import LLM, ChatMessage, Completion, LLMError, LLMTimeout

IN_FLIGHT = 4  # requests of one `complete_json_many` a server is sent at once


class OpenAICompatLLM(LLM):
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        context_window: int = 32768,
        timeout: float = 300.0,
        retries: int = 2,
        json_mode: str = "json_schema",  # or "json_object" for servers without schemas
    ) -> None:
        super().__init__(timeout=timeout, retries=retries)
        self.name = model
        self.model = model
        self.json_mode = json_mode
        self._context_window = context_window
        key = api_key or os.environ.get("DELTAMEM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key or 'none'}"}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers)

    @property
    def context_window(self) -> int:
        return self._context_window

    def _chat(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if schema is not None:
            if self.json_mode == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema, "strict": False},
                }
            else:
                body["response_format"] = {"type": "json_object"}
        try:
            resp = self._client.post("/chat/completions", json=body, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise LLMTimeout(f"{self.name}: no answer within {timeout:.0f}s") from exc
        except httpx.HTTPError as exc:
            raise LLMError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            raise LLMError(f"{self.name}: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            data = resp.json()
            text = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.name}: malformed response: {resp.text[:300]}") from exc
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
        )

    def _chat_many(
        self,
        prompts: list[list[ChatMessage]],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> list[Completion]:
        """Independent prompts sent a few at a time (servers batch concurrent
        requests); replies in the prompts' order, the first error raised."""

        def one(messages: list[ChatMessage]) -> Completion:
            return self._chat(
                messages,
                schema=schema,
                max_tokens=max_tokens,
                temperature=temperature,
                timeout=timeout,
            )

        with ThreadPoolExecutor(max_workers=max(1, min(IN_FLIGHT, len(prompts)))) as pool:
            return list(pool.map(one, prompts))
