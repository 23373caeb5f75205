"""A tiny randomly initialised Qwen2-architecture model for the training tests: a
byte-level BPE tokenizer trained here on a small corpus, with a ChatML template, the
model saved as a Hugging Face directory, and the same weights written as a GGUF
file that llama.cpp loads (f32, so its logits can be compared with transformers').
Needs the train extra (torch, transformers, gguf)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_tokenizer(corpus: list[str], vocab_size: int = 800) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def make_model(out: Path, corpus: list[str], *, seed: int = 0) -> tuple[Any, Any]:
    """The tiny model and tokenizer, saved to `out` (a Hugging Face directory)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = make_tokenizer(corpus)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return model, tok


def write_gguf(model: Any, tok: Any, path: Path) -> None:
    """The model as an f32 GGUF llama.cpp loads (qwen2 architecture, gpt2 tokenizer)."""
    import gguf

    c = model.config
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny-qwen2")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(float(getattr(c, "rope_theta", None) or 10000.0))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    raw = json.loads(tok.backend_tokenizer.to_str())
    vocab = raw["model"]["vocab"]
    specials = {t["content"]: t["id"] for t in raw["added_tokens"]}
    by_id = {i: t for t, i in {**vocab, **specials}.items()}
    tokens = [by_id[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in raw["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(
        [gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens]
    )
    w.add_token_merges(merges)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, c.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        target = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert target is not None, name
        w.add_tensor(target, np.ascontiguousarray(tensor.detach().cpu().numpy(), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def warm_up(
    model: Any,
    tok: Any,
    pairs: list[tuple[list[dict[str, str]], str]],
    *,
    steps: int = 60,
    lr: float = 3e-3,
) -> None:
    """A few supervised steps on (prompt messages, reply) pairs, so that sampling
    from the tiny model gives replies of varied reward (GRPO learns nothing from a
    group whose rewards are all equal)."""
    import torch

    rows = []
    for messages, reply in pairs:
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        r_ids = tok(reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
        rows.append((p_ids + r_ids, [-100] * len(p_ids) + r_ids))
    width = max(len(ids) for ids, _ in rows)
    pad = tok.pad_token_id
    ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in rows])
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
