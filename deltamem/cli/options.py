"""The CLI's global options (`deltamem --db ... --llm ... COMMAND`), set by the
main callback and read by every command module."""

from __future__ import annotations

from deltamem.llm.factory import LLMConfig


class Options:
    db: str | None = None
    llm: str | None = None
    llm_timeout: float | None = None
    embedder: str | None = None
    adapter: str | None = None  # a GGUF LoRA for the llama.cpp model

    @property
    def llm_config(self) -> LLMConfig:
        return LLMConfig(self.llm, timeout=self.llm_timeout, adapter=self.adapter)


OPTS = Options()
