"""The embedder port and its adapters."""

from __future__ import annotations

import os

from deltamem.embed.base import Embedder, EmbedderError


def make_embedder(spec: str | None = None) -> Embedder:
    """'local' (all-MiniLM-L6-v2 int8 ONNX) or 'http://host/v1#model@dim'."""
    spec = (spec or os.environ.get("DELTAMEM_EMBEDDER") or "local").strip()
    if spec == "local":
        from deltamem.embed.onnx_minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if spec.startswith(("http://", "https://")):
        url, _, rest = spec.partition("#")
        model, _, dim = rest.partition("@")
        if not model or not dim.isdigit():
            raise EmbedderError(f"write an embedding server as URL#model@dim, got {spec!r}")
        from deltamem.embed.openai_compat import OpenAICompatEmbedder

        return OpenAICompatEmbedder(url, model, dim=int(dim))
    raise EmbedderError(f"unknown embedder spec {spec!r}: use 'local' or 'URL#model@dim'")


__all__ = ["Embedder", "EmbedderError", "make_embedder"]
