"""From a short spec string (CLI flag, env var, config) to an LLM.

local                      the embedded default (Qwen2.5-Coder-1.5B, llama.cpp)
tiny                       SmolLM2-135M: exercises the engine, answers are useless
/path/to/model.gguf        any GGUF file through llama.cpp
http://host:port/v1#model  any OpenAI-compatible server (model after '#')
openai:gpt-4o-mini         api.openai.com with OPENAI_API_KEY

A llama.cpp model (local, tiny, a .gguf path) can carry a LoRA adapter in GGUF
form (`adapter=`, e.g. one made by `deltamem train grpo` + `deltamem train export`):
llama.cpp applies it to the base weights at load time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from deltamem.llm.base import LLM, LLMError

DEFAULT_SPEC = "local"
DEFAULT_TIMEOUT = 300.0  # seconds one call may take: a long session on a small CPU
ENV_TIMEOUT = "DELTAMEM_LLM_TIMEOUT"


@dataclass(frozen=True)
class LLMConfig:
    """Which model, and how long one call may take before it counts as failed.

    `timeout` None: $DELTAMEM_LLM_TIMEOUT, else 300 s. A call that times out is not
    asked again by the LLM layer; the worker tries a session `max_attempts` times,
    so a model that never answers parks a session after at most about
    `max_attempts` x `timeout` (plus the backoff between tries)."""

    spec: str | None = None
    timeout: float | None = None
    n_ctx: int = 8192
    adapter: str | None = None  # a GGUF LoRA file applied to a llama.cpp model


def llm_timeout(timeout: float | None = None) -> float:
    """`timeout`, else $DELTAMEM_LLM_TIMEOUT, else the default; LLMError if not a
    positive number of seconds (as for any other LLM that cannot be made)."""
    if timeout is None:
        raw = os.environ.get(ENV_TIMEOUT, "").strip()
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT
        except ValueError:
            raise LLMError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not math.isfinite(timeout) or timeout <= 0:
        raise LLMError(f"the LLM timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def make_llm(
    spec: str | LLMConfig | None = None,
    *,
    n_ctx: int | None = None,
    timeout: float | None = None,
    adapter: str | os.PathLike[str] | None = None,
) -> LLM:
    """An LLM from a spec string or an `LLMConfig`; keyword arguments override the
    config's fields. `adapter`: a GGUF LoRA file for a llama.cpp model."""
    config = spec if isinstance(spec, LLMConfig) else LLMConfig(spec)
    n_ctx = n_ctx if n_ctx is not None else config.n_ctx
    timeout = llm_timeout(timeout if timeout is not None else config.timeout)
    lora = os.fspath(adapter) if adapter is not None else config.adapter
    spec = (config.spec or os.environ.get("DELTAMEM_LLM") or DEFAULT_SPEC).strip()
    if lora and spec.startswith(("http://", "https://", "openai:")):
        raise LLMError(
            f"an adapter applies to a llama.cpp model (local, tiny, a .gguf path), "
            f"not to {spec!r}: serve the adapter with the server instead"
        )
    if spec.startswith(("http://", "https://")):
        url, _, model = spec.partition("#")
        model = model or os.environ.get("DELTAMEM_LLM_MODEL", "")
        if not model:
            raise LLMError(f"name the model after '#' in {spec!r}, e.g. {url}#qwen2.5")
        from deltamem.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(url, model, timeout=timeout)
    if spec.startswith("openai:"):
        from deltamem.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM("https://api.openai.com/v1", spec.split(":", 1)[1], timeout=timeout)

    from deltamem.llm import weights
    from deltamem.llm.llamacpp import LlamaCppLLM

    if spec == "local":
        return LlamaCppLLM(weights.assemble(), n_ctx=n_ctx, timeout=timeout, lora_path=lora)
    if spec == "tiny":
        return LlamaCppLLM(weights.tiny_model_path(), n_ctx=n_ctx, timeout=timeout, lora_path=lora)
    if spec.endswith(".gguf"):
        return LlamaCppLLM(spec, n_ctx=n_ctx, timeout=timeout, lora_path=lora)
    raise LLMError(
        f"unknown LLM spec {spec!r}: use 'local', 'tiny', a .gguf path, "
        "'http://host:port/v1#model' or 'openai:MODEL'"
    )
