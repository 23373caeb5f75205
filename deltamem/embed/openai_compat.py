"""Embeddings from any OpenAI-compatible `/embeddings` endpoint."""

from __future__ import annotations

import os

import httpx
import numpy as np

from deltamem.embed.base import Embedder, EmbedderError, l2_normalise


class OpenAICompatEmbedder(Embedder):
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        dim: int,
        api_key: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.name = model
        self.model = model
        self.dim = dim
        key = api_key or os.environ.get("DELTAMEM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {key or 'none'}"},
            timeout=timeout,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            resp = self._client.post("/embeddings", json={"model": self.model, "input": texts})
            resp.raise_for_status()
            rows = sorted(resp.json()["data"], key=lambda r: r["index"])
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise EmbedderError(f"embedding request to {self.model} failed: {exc}") from exc
        vecs = np.array([r["embedding"] for r in rows], dtype=np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise EmbedderError(
                f"{self.model} returned shape {vecs.shape}, expected dim {self.dim}"
            )
        return l2_normalise(vecs)
