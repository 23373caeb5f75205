"""A PEFT LoRA adapter as a GGUF LoRA that llama.cpp applies to the product's model.

What llama.cpp's `convert_lora_to_gguf.py` does for architectures whose Hugging
Face weights map to GGUF tensors by name alone (Qwen2, Qwen3), written with the
`gguf` package so no llama.cpp checkout is needed:

* each `…layers.N.<module>.lora_A.weight` / `.lora_B.weight` pair becomes
  `<gguf name of the base weight>.lora_a` / `.lora_b` (e.g. `blk.3.attn_q.weight.lora_a`),
  A of shape (r, in) and B of shape (out, r) as PEFT stores them;
* metadata `general.architecture`, `general.type = adapter`, `adapter.type = lora`
  and `adapter.lora.alpha`; llama.cpp scales by alpha / r, as PEFT does (an
  rsLoRA adapter, scaled by alpha / √r, is written with alpha·√r so that the
  product is the same).

The base model is named by a GGUF file (the model the adapter will be applied
to: names and shapes are checked against it) or by a Hugging Face directory with
`config.json`. Adapters on embeddings or the output head, and `modules_to_save`,
are refused, as llama.cpp's converter refuses them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Hugging Face architectures whose tensors map to GGUF by name alone
HF_ARCHES = {"Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}
GGUF_ARCHES = frozenset(HF_ARCHES.values())
_LORA = re.compile(r"^(?:base_model\.model\.)?(.+)\.lora_([AB])(?:\.[^.]+)?\.weight$")


class ExportError(ValueError):
    pass


@dataclass
class BaseModelInfo:
    arch: str  # GGUF architecture name, e.g. "qwen2"
    n_layers: int
    shapes: dict[str, tuple[int, int]] = field(default_factory=dict)  # gguf name -> (out, in)


@dataclass
class ExportReport:
    out: Path
    arch: str
    rank: int
    alpha: float
    tensors: int  # LoRA pairs written
    dtype: str


def base_info(base: Path) -> BaseModelInfo:
    """Architecture, depth and (for a GGUF) weight shapes of the base model."""
    if base.is_file():
        from gguf import GGUFReader

        reader = GGUFReader(str(base))
        arch = _field(reader, "general.architecture")
        if not isinstance(arch, str):
            raise ExportError(f"{base}: no general.architecture, not a GGUF model")
        if _field(reader, "general.type") == "adapter":
            raise ExportError(f"{base} is an adapter, not a base model")
        n_layers = int(_field(reader, f"{arch}.block_count") or 0)
        shapes = {
            t.name: (int(t.shape[1]), int(t.shape[0]))  # GGUF lists ne: (in, out)
            for t in reader.tensors
            if len(t.shape) == 2
        }
        return BaseModelInfo(arch, n_layers, shapes)
    config_path = base / "config.json" if base.is_dir() else base
    if not config_path.is_file():
        raise ExportError(
            f"base model {base}: neither a GGUF file nor a directory with config.json"
        )
    config = json.loads(config_path.read_text(encoding="utf-8"))
    names = config.get("architectures") or []
    arch = next((HF_ARCHES[n] for n in names if n in HF_ARCHES), None)
    if arch is None:
        raise ExportError(
            f"base architecture {names or config.get('model_type')!r} is not supported here "
            f"(supported: {', '.join(HF_ARCHES)}); use llama.cpp's convert_lora_to_gguf.py"
        )
    return BaseModelInfo(arch, int(config["num_hidden_layers"]))


def resolve_adapter(path: Path, base: Path | None = None) -> tuple[Path, Path]:
    """(the PEFT adapter directory, the base model) from a path that is either an
    adapter directory or the OUT of `deltamem train grpo` (OUT/adapter, with the base
    it was trained on recorded in OUT/deltamem-train.json: its GGUF file, else the
    config saved in OUT/base)."""
    path = Path(path)
    run = path
    if not (path / ADAPTER_CONFIG).is_file() and (path / "adapter" / ADAPTER_CONFIG).is_file():
        path = path / "adapter"
    elif (path.parent / "deltamem-train.json").is_file():
        run = path.parent
    if base is not None:
        return path, Path(base)
    meta_path = run / "deltamem-train.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        model, gguf_file = str(meta.get("model", "")), meta.get("gguf_file")
        if gguf_file:
            gguf_path = Path(model) / gguf_file if not model.endswith(".gguf") else Path(model)
            if gguf_path.is_file():
                return path, gguf_path
        if (run / "base" / "config.json").is_file():
            return path, run / "base"
    raise ExportError(f"name the base model of {path} with --base (its GGUF file or config dir)")


def _field(reader: Any, key: str) -> Any:
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def export_lora(
    adapter_dir: Path, base: Path, out: Path, *, dtype: str = "f16", name: str | None = None
) -> ExportReport:
    """Write the PEFT adapter in `adapter_dir` as a GGUF LoRA for `base` to `out`."""
    import gguf
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    config_path, weights_path = adapter_dir / ADAPTER_CONFIG, adapter_dir / ADAPTER_WEIGHTS
    if not config_path.is_file() or not weights_path.is_file():
        raise ExportError(f"{adapter_dir}: expected {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS}")
    lconf = json.loads(config_path.read_text(encoding="utf-8"))
    if lconf.get("peft_type", "LORA") != "LORA":
        raise ExportError(f"{adapter_dir}: a {lconf.get('peft_type')} adapter, not LoRA")
    if lconf.get("modules_to_save"):
        raise ExportError("modules_to_save (fully trained modules) cannot be a GGUF LoRA")
    if lconf.get("use_dora"):
        raise ExportError("DoRA adapters cannot be a GGUF LoRA")
    rank = int(lconf["r"])
    alpha = float(lconf["lora_alpha"])
    if lconf.get("use_rslora"):
        alpha *= math.sqrt(rank)  # PEFT scales by alpha/√r; llama.cpp by alpha/r
    if lconf.get("rank_pattern") or lconf.get("alpha_pattern"):
        raise ExportError("per-module rank or alpha patterns are not supported")
    if dtype not in ("f16", "f32"):
        raise ExportError(f"dtype must be f16 or f32, got {dtype!r}")

    info = base_info(Path(base))
    if info.arch not in GGUF_ARCHES:
        raise ExportError(
            f"base architecture {info.arch!r} is not supported here (supported: "
            f"{', '.join(sorted(GGUF_ARCHES))}); use llama.cpp's convert_lora_to_gguf.py"
        )
    arch_enum = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == info.arch)
    tmap = gguf.get_tensor_name_map(arch_enum, info.n_layers)

    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, value in load_file(str(weights_path)).items():
        m = _LORA.match(key)
        if m is None:
            raise ExportError(f"unexpected tensor {key!r}: not a lora_A or lora_B weight")
        module, which = m.groups()
        if module.endswith(("embed_tokens", "lm_head")):
            raise ExportError(f"an adapter on {module} cannot be a GGUF LoRA")
        target = tmap.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None:
            raise ExportError(f"no GGUF tensor for {module!r} in a {info.arch} model")
        pairs.setdefault(target, {})[which] = value

    np_dtype = np.float16 if dtype == "f16" else np.float32
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), info.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    writer.add_name(name or adapter_dir.resolve().name)
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32
    )
    for target in sorted(pairs, key=_natural):
        ab = pairs[target]
        if set(ab) != {"A", "B"}:
            raise ExportError(f"{target}: lora_A and lora_B must both be present")
        a, b = ab["A"], ab["B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ExportError(f"{target}: shapes A{a.shape} B{b.shape} do not make a LoRA")
        if info.shapes:
            want = info.shapes.get(target)
            if want is None:
                raise ExportError(f"the base model has no tensor {target}")
            if (b.shape[0], a.shape[1]) != want:
                raise ExportError(
                    f"{target}: the adapter is for a ({b.shape[0]}, {a.shape[1]}) weight, "
                    f"the base model's is {want}: another base model?"
                )
        writer.add_tensor(target + ".lora_a", np.ascontiguousarray(a, dtype=np_dtype))
        writer.add_tensor(target + ".lora_b", np.ascontiguousarray(b, dtype=np_dtype))
    if not pairs:
        raise ExportError(f"{adapter_dir}: no LoRA tensors")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return ExportReport(out, info.arch, rank, alpha, len(pairs), dtype)


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
