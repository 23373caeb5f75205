"""Embedded llama.cpp adapter (llama-cpp-python): a GGUF file, no server.

llama-cpp-python loads the model and its tokenizer; decoding runs on a context of
our own (llamacpp_decoder), which keeps each slot's KV cache and reuses the
longest prefix any slot holds, so prompts that start with the same static
instructions only pay for what follows them, and which decodes several prompts
side by side (`complete_json_many`). We count the tokens really evaluated to
report how much of each prompt came from that cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deltamem.llm.base import FREE_LAYOUT, LLM, ChatMessage, Completion, LLMError, LLMTimeout
from deltamem.llm.llamacpp_decoder import DeadlineExceeded, DecodeError, Decoder, Request

FREE_SPACE = '| " " | "\\n" [ \\t]{0,20}'  # as llama.cpp's json.gbnf and its schema converter
SLOTS = 4  # prompts decoded side by side: on 2 CPU cores a step for four costs about
# twice a step for one, and more gain little (docs/journal/benchmarks.md)


class LlamaCppLLM(LLM):
    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 0,
        timeout: float = 300.0,
        retries: int = 1,
        name: str | None = None,
        lora_path: str | Path | None = None,
        slots: int = SLOTS,
    ) -> None:
        """`lora_path`: a LoRA adapter in GGUF form (`deltamem train export`)
        applied to the model's weights at load time."""
        super().__init__(timeout=timeout, retries=retries)
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise LLMError(
                "llama-cpp-python is not installed; `pip install 'deltamem[local]'`"
            ) from exc
        path = Path(model_path)
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {path}")
        lora = Path(lora_path) if lora_path is not None else None
        if lora is not None and not lora.is_file():
            raise LLMError(f"GGUF LoRA adapter file not found: {lora}")
        threads = n_threads or default_threads()
        try:
            # the Llama object's own context is not used for decoding: keep it small
            self._llama = Llama(
                model_path=str(path),
                n_ctx=256,
                n_batch=256,
                n_threads=threads,
                seed=seed,
                verbose=False,
                lora_path=str(lora) if lora is not None else None,
            )
        except RuntimeError as exc:  # llama.cpp refused the adapter (another base model?)
            if lora is None:
                raise
            raise LLMError(f"llama.cpp cannot apply the adapter {lora} to {path}: {exc}") from exc
        # llama-cpp-python 0.3.x tests the adapter handle with `is None`, but a failed
        # load gives a NULL pointer object: it would go on silently without the LoRA
        adapter = getattr(self._llama, "_lora_adapter", None)
        if lora is not None and not adapter:
            self._llama.close()
            raise LLMError(
                f"llama.cpp cannot apply the adapter {lora} to {path} "
                "(not a GGUF LoRA, or made for another base model)"
            )
        try:
            self._decoder = Decoder(
                self._llama._model.model,
                n_ctx=n_ctx,
                n_threads=threads,
                slots=slots,
                seed=seed,
                lora=adapter if lora is not None else None,
                like=self._llama.context_params,  # the same attention, cache types
            )
        except DecodeError as exc:
            self._llama.close()
            raise LLMError(f"llama.cpp: {exc}") from exc
        # the context goes before the weights it uses (the exit stack runs last-in first)
        self._llama._stack.callback(self._decoder.close)
        self.name = name or (f"{path.stem}+{lora.stem}" if lora is not None else path.stem)
        self.model_path = path
        self.lora_path = lora
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._slots = slots
        self._engine_lock = threading.Lock()
        self._grammars: dict[str, str] = {}

    @property
    def context_window(self) -> int:
        return self._n_ctx

    @property
    def batch_size(self) -> int:
        return self._slots

    def with_context(self, n_ctx: int) -> LLM:
        """A second engine on the same weights (mmap-shared) with a larger context
        and its own KV cache, so a caller with a long fixed prompt keeps it cached."""
        twin = LlamaCppLLM(
            self.model_path,
            n_ctx=max(n_ctx, self._n_ctx),
            n_threads=self._n_threads,
            timeout=self.timeout,
            retries=self.retries,
            name=self.name,
            lora_path=self.lora_path,
            slots=self._slots,
        )
        # the same listeners (one list, so later ones too): a run's call log
        # must see the calls of every engine the run uses
        twin._listeners = self._listeners
        return twin

    def _grammar(self, schema: dict[str, Any] | None) -> str | None:
        """The schema's GBNF, built once per schema. A free-layout schema gets
        llama.cpp's own whitespace rule (newline and up to 20 spaces or tabs)
        instead of llama-cpp-python's single optional space."""
        if schema is None:
            return None
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            plain = {k: v for k, v in schema.items() if k != "$comment"}
            gbnf = json_schema_to_gbnf(json.dumps(plain))
            if schema.get("$comment") == FREE_LAYOUT:
                rules = [ln for ln in gbnf.splitlines() if not ln.startswith("space ::=")]
                rules.append(f"space ::= {FREE_SPACE}")
                gbnf = "\n".join(rules)
            self._grammars[key] = gbnf
        return self._grammars[key]

    @contextlib.contextmanager
    def _engine(self, what: str, timeout: float) -> Iterator[None]:
        """The decoder, one caller at a time (one context: calls must not interleave),
        its errors as the LLM port's."""
        with self._engine_lock:
            try:
                yield
            except DeadlineExceeded:
                raise LLMTimeout(f"{self.name}: {what} exceeded {timeout:g}s") from None
            except DecodeError as exc:
                raise LLMError(f"llama.cpp refused the request: {exc}") from exc

    def _prompt_text(self, messages: list[ChatMessage]) -> str:
        return chat_prompt_text(self._llama, messages)

    def _tokens(self, messages: list[ChatMessage]) -> list[int]:
        text = self._prompt_text(messages)
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _options(
        self, messages: list[ChatMessage], options: list[str], *, timeout: float
    ) -> tuple[dict[str, float], Completion]:
        import numpy as np

        llama = self._llama
        tokens = self._tokens(messages)
        firsts = {
            o: {
                llama.tokenize(v.encode("utf-8"), add_bos=False, special=False)[0]
                for v in (o, o.capitalize())
            }
            for o in options
        }
        with self._engine("scoring", timeout):
            raw, evaluated = self._decoder.next_logits(tokens, deadline=time.monotonic() + timeout)
        logits = raw.astype(np.float64)
        top = logits.max()
        log_z = top + np.log(np.exp(logits - top).sum())
        scores = {
            o: float(np.log(sum(np.exp(logits[t] - log_z) for t in ids)))
            for o, ids in firsts.items()
        }
        n = len(tokens)
        reply = json.dumps({o: round(v, 4) for o, v in scores.items()})
        return scores, Completion(reply, n, 0, cached_tokens=max(0, n - evaluated))

    def count_tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode("utf-8", "replace"), add_bos=False))

    def _chat(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> Completion:
        return self._chat_many(
            [messages],
            schema=schema,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
        )[0]

    def _chat_many(
        self,
        prompts: list[list[ChatMessage]],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> list[Completion]:
        grammar = self._grammar(schema)
        requests = []
        for messages in prompts:
            tokens = self._tokens(messages)
            cap = min(max_tokens, max(0, self._n_ctx - len(tokens)))  # too long: refused below
            requests.append(Request(tokens, cap, temperature=temperature, grammar=grammar))
        with self._engine("generation", timeout):
            # a batch may take longer than one call, not longer than its calls in turn
            deadline = time.monotonic() + timeout * len(prompts)
            results = self._decoder.generate(requests, deadline=deadline)
        return [
            Completion(
                text=r.text,
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                cached_tokens=r.prompt_tokens - r.evaluated,
                logprobs=r.logprobs,
                token_ends=r.token_ends,
            )
            for r in results
        ]


def default_threads() -> int:
    """llama.cpp threads: DELTAMEM_THREADS, else every core."""
    return int(os.environ.get("DELTAMEM_THREADS", 0)) or os.cpu_count() or 2


def chat_prompt_text(llama: Any, messages: list[ChatMessage]) -> str:
    """The model's chat template applied as create_chat_completion applies it
    (`llama` may be loaded with `vocab_only=True`: the template needs no weights)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    token_text = llama._model.token_get_text
    formatter = Jinja2ChatFormatter(
        template=llama.metadata["tokenizer.chat_template"],
        eos_token=token_text(llama.token_eos()),
        bos_token=token_text(llama.token_bos()),
    )
    return formatter(messages=messages).prompt  # type: ignore[arg-type]
