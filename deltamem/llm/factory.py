"""From a short spec string (CLI flag, env var, config) to an LLM.

local                      the embedded default (Qwen2.5-Coder-1.5B, llama.cpp)
tiny                       SmolLM2-135M: exercises the engine, answers are useless
/path/to/model.gguf        any GGUF file through llama.cpp
http://host:port/v1#model  any OpenAI-compatible server (model after '#')
openai:gpt-4o-mini         api.openai.com with OPENAI_API_KEY
"""

from __future__ import annotations

import os

from deltamem.llm.base import LLM, LLMError

DEFAULT_SPEC = "local"


def make_llm(spec: str | None = None, *, n_ctx: int = 8192, timeout: float = 300.0) -> LLM:
    spec = (spec or os.environ.get("DELTAMEM_LLM") or DEFAULT_SPEC).strip()
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
        return LlamaCppLLM(weights.assemble(), n_ctx=n_ctx, timeout=timeout)
    if spec == "tiny":
        return LlamaCppLLM(weights.tiny_model_path(), n_ctx=n_ctx, timeout=timeout)
    if spec.endswith(".gguf"):
        return LlamaCppLLM(spec, n_ctx=n_ctx, timeout=timeout)
    raise LLMError(
        f"unknown LLM spec {spec!r}: use 'local', 'tiny', a .gguf path, "
        "'http://host:port/v1#model' or 'openai:MODEL'"
    )
