"""Embedded llama.cpp adapter (llama-cpp-python): a GGUF file, no server.

llama-cpp-python keeps the KV cache of the previous call and reuses the longest
common prefix, so prompts that start with the same static instructions only pay
for what follows them. We count the tokens the engine really evaluates to report
how much of each prompt came from that cache.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deltamem.llm.base import FREE_LAYOUT, LLM, ChatMessage, Completion, LLMError, LLMTimeout

FREE_SPACE = '| " " | "\\n" [ \\t]{0,20}'  # as llama.cpp's json.gbnf and its schema converter


class _Deadline(Exception):
    pass


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
        threads = n_threads or int(os.environ.get("DELTAMEM_THREADS", 0)) or (os.cpu_count() or 2)
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                n_batch=512,
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
        if lora is not None and not getattr(self._llama, "_lora_adapter", None):
            self._llama.close()
            raise LLMError(
                f"llama.cpp cannot apply the adapter {lora} to {path} "
                "(not a GGUF LoRA, or made for another base model)"
            )
        self.name = name or (f"{path.stem}+{lora.stem}" if lora is not None else path.stem)
        self.model_path = path
        self.lora_path = lora
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._evaluated = 0
        self._engine_lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        self._deadline: float | None = None
        original_eval = self._llama.eval

        def counting_eval(tokens: Any) -> None:
            # eval runs in Python before each token is decoded, so raising here stops a
            # call cleanly (a logits processor runs inside a ctypes callback, where
            # llama-cpp-python swallows exceptions and generation goes on)
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise _Deadline
            self._evaluated += len(tokens)
            original_eval(tokens)

        self._llama.eval = counting_eval  # type: ignore[method-assign]

    @property
    def context_window(self) -> int:
        return self._n_ctx

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
        )
        # the same listeners (one list, so later ones too): a run's call log
        # must see the calls of every engine the run uses
        twin._listeners = self._listeners
        return twin

    def _free_layout_grammar(self, schema: dict[str, Any]) -> Any:
        """The schema's grammar with llama.cpp's own whitespace rule (newline and
        up to 20 spaces or tabs) instead of llama-cpp-python's single optional
        space; built once per schema."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

            plain = {k: v for k, v in schema.items() if k != "$comment"}
            gbnf = json_schema_to_gbnf(json.dumps(plain))
            rules = [ln for ln in gbnf.splitlines() if not ln.startswith("space ::=")]
            rules.append(f"space ::= {FREE_SPACE}")
            self._grammars[key] = LlamaGrammar.from_string("\n".join(rules), verbose=False)
        return self._grammars[key]

    def _prompt_text(self, messages: list[ChatMessage]) -> str:
        return chat_prompt_text(self._llama, messages)

    def _options(
        self, messages: list[ChatMessage], options: list[str], *, timeout: float
    ) -> tuple[dict[str, float], Completion]:
        import numpy as np

        llama = self._llama
        text = self._prompt_text(messages)
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        firsts = {
            o: {
                llama.tokenize(v.encode("utf-8"), add_bos=False, special=False)[0]
                for v in (o, o.capitalize())
            }
            for o in options
        }
        with self._engine_lock:
            before = self._evaluated
            self._deadline = time.monotonic() + timeout
            try:
                # keep the KV cache of the longest shared prefix, as generation does
                same = shared_prefix(llama._input_ids[: llama.n_tokens], tokens[:-1])
                llama.n_tokens = same
                llama.eval(tokens[same:])
                logits = np.ctypeslib.as_array(
                    llama._ctx.get_logits(), shape=(llama.n_vocab(),)
                ).astype(np.float64)
            except _Deadline:
                raise LLMTimeout(f"{self.name}: scoring exceeded {timeout:g}s") from None
            finally:
                self._deadline = None
            evaluated = self._evaluated - before
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
        kwargs: dict[str, Any] = {}
        if schema is not None and schema.get("$comment") == FREE_LAYOUT:
            kwargs["grammar"] = self._free_layout_grammar(schema)
        elif schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        with self._engine_lock:  # one llama context: calls must not interleave
            before = self._evaluated
            self._deadline = time.monotonic() + timeout
            try:
                out = self._llama.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=max_tokens,
                    temperature=temperature,
                    **kwargs,
                )
            except _Deadline:
                raise LLMTimeout(f"{self.name}: generation exceeded {timeout:g}s") from None
            except ValueError as exc:  # e.g. prompt longer than the context
                raise LLMError(f"llama.cpp refused the request: {exc}") from exc
            finally:
                self._deadline = None
            evaluated = self._evaluated - before
        usage = out["usage"]  # type: ignore[index]
        prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
        prompt_evaluated = max(0, evaluated - completion)
        return Completion(
            text=out["choices"][0]["message"]["content"] or "",  # type: ignore[index]
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=max(0, prompt - prompt_evaluated),
        )


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


def shared_prefix(cached: Iterable[int], tokens: Iterable[int]) -> int:
    """How many leading tokens a prompt shares with what the KV cache holds:
    llama.cpp evaluates only the rest."""
    n = 0
    for a, b in zip(cached, tokens, strict=False):
        if a != b:
            break
        n += 1
    return n
