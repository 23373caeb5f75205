"""GRPO end to end on CPU with a tiny randomly initialised Qwen2-architecture model
(tests/tiny_qwen.py): `deltamem train grpo` runs a few steps on records built from
the HaluMem fixture, with rewards from the real reward function; the adapter's
weights change; `--resume last` goes on from the checkpoint; `deltamem train
export` writes a GGUF LoRA that llama.cpp loads on the same model written as GGUF,
and its logits there match the PEFT model's in transformers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

_WHY = "the train extra is not installed (pip install 'deltamem[train]')"
torch = pytest.importorskip("torch", reason=_WHY)
for _mod in ("transformers", "trl", "peft", "gguf", "datasets", "safetensors"):
    pytest.importorskip(_mod, reason=_WHY)

from tiny_qwen import make_model, warm_up, write_gguf  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from deltamem.cli.main import app  # noqa: E402
from deltamem.train.export import ExportError, export_lora  # noqa: E402
from deltamem.train.grpo import REWARD_LOG, load_records, turn_examples  # noqa: E402
from deltamem.train.records import records_from_halumem, write_records  # noqa: E402
from deltamem.train.reward_rules import RewardRules  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"


@dataclass
class Tiny:
    records: Path
    model_dir: Path
    gguf: Path
    model: Any
    tok: Any


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    """The tiny model, warmed up on the fixture's turns so that its samples differ in
    reward (a group of equal rewards teaches GRPO nothing), as a Hugging Face
    directory and as an f32 GGUF."""
    root = tmp_path_factory.mktemp("tiny")
    records = root / "records.jsonl"
    write_records(records_from_halumem(FIXTURE), records)
    examples = turn_examples(load_records(records)).examples
    pairs = [(e.prompt, json.dumps({"facts": e.gold})) for e in examples]
    corpus = [m["content"] for e in examples for m in e.prompt] + [r for _, r in pairs]
    model_dir = root / "model"
    model, tok = make_model(model_dir, corpus * 5)
    warm_up(model, tok, pairs, steps=40, lr=3e-3)
    model.save_pretrained(model_dir)
    gguf_path = root / "tiny-f32.gguf"
    write_gguf(model, tok, gguf_path)
    return Tiny(records, model_dir, gguf_path, model, tok)


def _prompt_ids(tok: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _llama_logits(base: Path, adapter: Path | None, ids: list[int]) -> np.ndarray:
    """Last-position logits of llama.cpp on `ids`, through deltamem's engine wrapper."""
    from deltamem.llm import make_llm

    llm: Any = make_llm(str(base), adapter=adapter, n_ctx=1024)
    try:
        logits, _ = llm._decoder.next_logits(ids)
        return np.asarray(logits)
    finally:
        llm._llama.close()


def _hf_logits(model: Any, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].float().numpy()


def test_grpo_trains_resumes_and_exports_an_adapter_llama_cpp_loads(
    tiny: Tiny, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the local extra) is not installed")
    from gguf import GGUFReader
    from safetensors.numpy import load_file

    out = tmp_path / "run"
    base_args = [
        "train", "grpo", "--model", str(tiny.model_dir), "--records", str(tiny.records),
        "--out", str(out), "--group", "4", "--lr", "1e-3", "--max-completion", "40",
        "--save-steps", "1", "--max-prompt", "600",
    ]  # fmt: skip
    runner = CliRunner()
    result = runner.invoke(app, [*base_args, "--steps", "2"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    log = [json.loads(line) for line in (out / REWARD_LOG).read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2]
    for r in log:  # rewards computed by the real reward function, in [0, 1]
        assert 0.0 <= r["reward"] <= 1.0 and r["format"] is not None
    assert any(r["reward_std"] > 0 for r in log), "no group had rewards of different value"
    for r in log:  # each step names the reward's rules that scored it, and their refusals
        assert r["rules"] == list(RewardRules().enabled)
        assert set(r["refused_by"]) <= set(r["rules"]) and r["facts"] >= 0
    weights = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(np.abs(b).max() > 0 for b in lora_b), "LoRA B is still all zeros"
    meta = json.loads((out / "deltamem-train.json").read_text())
    assert meta["settings"]["group"] == 4 and meta["examples"] == 6
    assert meta["settings"]["reward_rules"]["enabled"] == list(RewardRules().enabled)

    again = runner.invoke(app, [*base_args, "--steps", "3", "--resume", "last"])
    assert again.exit_code == 0, again.output + repr(again.exception)
    log = [json.loads(line) for line in (out / REWARD_LOG).read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3]  # went on from checkpoint-2

    gguf_out = tmp_path / "adapter.gguf"
    exported = runner.invoke(
        app, ["train", "export", str(out), "--base", str(tiny.gguf), "--out", str(gguf_out)]
    )
    assert exported.exit_code == 0, exported.output + repr(exported.exception)
    reader = GGUFReader(str(gguf_out))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert fields["general.architecture"] == "qwen2"
    assert fields["general.type"] == "adapter" and fields["adapter.type"] == "lora"
    assert fields["adapter.lora.alpha"] == 16.0
    shapes = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    hidden, kv = 64, 2 * (64 // 4)  # 2 KV heads of 16
    assert shapes["blk.0.attn_q.weight.lora_a"] == (hidden, 8)  # GGUF order: (in, r)
    assert shapes["blk.0.attn_q.weight.lora_b"] == (8, hidden)  # (r, out)
    assert shapes["blk.1.attn_k.weight.lora_b"] == (8, kv)
    assert len(shapes) == 2 * 4 * 2  # 2 layers x q, k, v, o x (a, b)

    # llama.cpp applies it: same logits as transformers with the PEFT adapter
    from peft import PeftModel

    peft_model = PeftModel.from_pretrained(tiny.model, str(out / "adapter")).eval()
    ids = _prompt_ids(tiny.tok, turn_examples(load_records(tiny.records)).examples[0].prompt)
    np.testing.assert_allclose(
        _llama_logits(tiny.gguf, gguf_out, ids), _hf_logits(peft_model, ids), atol=2e-3
    )
    peft_model.unload()


@pytest.mark.parametrize("rslora", [False, True])
def test_export_matches_peft_on_every_projection(tiny: Tiny, tmp_path: Path, rslora: bool) -> None:
    """A LoRA with random A and B on all seven projections: llama.cpp's logits with
    the exported GGUF equal transformers' (names, orientation and scale are right),
    and differ from the base model's."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the local extra) is not installed")
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        init_lora_weights=False,  # random B too: the adapter changes the output
        use_rslora=rslora,
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(tiny.model, config).eval()
    try:
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                with torch.no_grad():
                    p.mul_(20.0)  # large enough to move the logits clearly
        adapter_dir = tmp_path / "adapter"
        peft_model.save_pretrained(adapter_dir)
        out = tmp_path / "a.gguf"
        report = export_lora(adapter_dir, tiny.gguf, out, dtype="f32")
        assert report.tensors == 2 * 7 and report.rank == 4
        ids = _prompt_ids(tiny.tok, [{"role": "user", "content": "I work as a nurse in Leeds."}])
        want = _hf_logits(peft_model, ids)
        with peft_model.disable_adapter():
            base = _hf_logits(peft_model, ids)
        effect = np.abs(want - base).max()
        assert effect > 0.05
        # the adapter's effect reproduced to within 1% of itself (a wrong name,
        # orientation or scale is off by the order of the effect): an absolute bound
        # failed when the tiny model's corpus changed (0.014 off an effect of 6.2),
        # llama.cpp and torch summing the ×20 adapter in different orders
        got = _llama_logits(tiny.gguf, out, ids)
        assert np.abs(got - want).max() < 0.01 * effect
    finally:
        peft_model.unload()


def test_export_refuses_a_base_of_another_shape(tiny: Tiny, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    other = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=tiny.model.config.vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )
    peft_model = get_peft_model(other, LoraConfig(r=2, target_modules=["q_proj"]))
    peft_model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(ExportError, match="another base model"):
        export_lora(tmp_path / "adapter", tiny.gguf, tmp_path / "x.gguf")
    # with a config directory instead of a GGUF there is nothing to check shapes against
    other.config.architectures = ["Qwen2ForCausalLM"]
    other.config.save_pretrained(tmp_path / "cfg")
    assert export_lora(tmp_path / "adapter", tmp_path / "cfg", tmp_path / "y.gguf").tensors == 2


def test_a_gguf_model_loads_for_training(tiny: Tiny) -> None:
    """`--model FILE.gguf`: transformers dequantises it; same weights, same logits,
    and the config export needs (architectures, no quantization_config)."""
    from deltamem.train.grpo import base_config, load_model

    model, tok = load_model(str(tiny.gguf))
    assert getattr(model, "hf_quantizer", None) is None
    ids = _prompt_ids(tiny.tok, [{"role": "user", "content": "I moved to York."}])
    assert _prompt_ids(tok, [{"role": "user", "content": "I moved to York."}]) == ids
    np.testing.assert_allclose(_hf_logits(model, ids), _hf_logits(tiny.model, ids), atol=1e-4)
    config = base_config(model)
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert "quantization_config" not in config
