"""The embedder port: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class EmbedderError(RuntimeError):
    pass


class Embedder(ABC):
    name: str = "embedder"
    dim: int

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), each row of unit length."""

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def l2_normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)
