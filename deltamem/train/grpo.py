"""GRPO for the manager's model, with LoRA, on training records (SPEC §5, DeltaMem §3.3).

**What is trained.** The default manager extracts facts one user turn at a time
(`deltamem/manager/extract.py`): for each user message it sends a system prompt
and one user prompt (date, who the person is, the assistant's message before,
the message itself) and reads `{"facts": [...]}`. One training example is one
user turn of a record, and its prompt is built by the extractor's own
`turn_prompt`, so training sees exactly what the product sends; TRL renders the
messages with the model's chat template, as llama.cpp does with the GGUF's.

**The person's name** is what the product would know before the session: the
name each message carries, else one the person states in the session ("my name
is …", "I'm …"), else one the memories before the session state or open with
(`state_before` standing in for the store the manager searches).

**Gold facts of a turn.** Records carry the session's operations with keywords,
not the turn each came from. An operation (add, update or none: the extractor
writes what a turn states, whether or not it changes the memory) is attributed to
the user turn holding the largest share of its keywords, leaving out keywords that
are only the person's name; an operation whose keywords occur in no user message
is left out of every turn (`TurnExamples.unattributed` counts them). A turn with
no attributed operation is an example whose gold is "no facts".

**Reward** (`deltamem/train/reward.py`) = 0.1·format + 0.1·retrieval +
0.8·r_trans: the format of the reply, the share of its facts that pass the
reward's own rules (`reward_rules.RewardRules`, `GRPOSettings.reward_rules`: in the
third person, names the person, grounded in the turn's words, not too long), and
the state distance between the facts that pass and the turn's gold facts. The
reward owes nothing to the manager's write rules (an import contract holds it to
that); only the prompt is the product's. Each logged step in OUT/rewards.jsonl
names the rules that scored it and how many facts each refused, and
OUT/deltamem-train.json records the rule set, so that reward hacking against the
rules can be seen.

torch, transformers, trl, peft and datasets are imported inside the functions
that need them (the `train` extra), so the base install imports this module.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.llm.base import ChatMessage
from deltamem.manager.extract import introduced_name, name_in, turn_prompt
from deltamem.text import leading_name, words
from deltamem.train.distance import EmbedFn, keyword_in
from deltamem.train.records import HELDOUT_SHARE, Split, TrainingOp, TrainingRecord, select
from deltamem.train.reward import ExtractionReward, refusals
from deltamem.train.reward_rules import RewardRules
from deltamem.types import Message, SessionRecord

log = logging.getLogger(__name__)

TRAIN_META = "deltamem-train.json"  # in OUT: what was trained, on what base
BASE_CONFIG_DIR = "base"  # OUT/base/config.json: the base model's config (for export)
ADAPTER_DIR = "adapter"  # OUT/adapter: the final PEFT adapter
REWARD_LOG = "rewards.jsonl"  # OUT/rewards.jsonl: one line per logged step


# --- records -> examples -------------------------------------------------------------


def load_records(path: Path) -> list[TrainingRecord]:
    """Training records from a JSONL file (`deltamem train records`, `deltamem synth`)."""
    out: list[TrainingRecord] = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            try:
                ops = [TrainingOp(**o) for o in raw.pop("ops", [])]
                out.append(TrainingRecord(**raw, ops=ops))
            except TypeError as exc:
                raise ValueError(f"{path}:{n}: not a training record ({exc})") from None
    return out


def session_of(record: TrainingRecord) -> SessionRecord:
    msgs = [Message.model_validate(m) for m in record.messages if str(m.get("content", "")).strip()]
    ts = record.timestamp or next((m.timestamp for m in msgs if m.timestamp), None)
    return SessionRecord.model_validate(
        {
            "user_id": record.user,
            "session_id": record.session_id,
            "timestamp": ts or "1970-01-01T00:00:00+00:00",
            "messages": msgs,
            "content_hash": "",
        }
    )


def known_name(session: SessionRecord, state_before: Sequence[str]) -> str | None:
    """The name the manager would know before extracting (see the module doc)."""
    own = [m.content for m in session.messages if m.role == "user"]
    return (
        name_in(own)
        or introduced_name(own)
        or name_in(list(state_before))
        or leading_name(list(state_before)[:50])
    )


def attribute_ops(
    ops: Sequence[TrainingOp], user_turns: dict[int, str], subject_words: set[str]
) -> tuple[dict[int, list[TrainingOp]], int]:
    """Each operation to the user turn holding the largest share of its keywords
    (name-only keywords left out; ties: the earlier turn). Returns the attribution
    and the number of operations no turn holds."""
    out: dict[int, list[TrainingOp]] = {i: [] for i in user_turns}
    missed = 0
    for op in ops:
        kws = [k for k in op.keywords if {w.lower() for w in words(k)} - subject_words]
        best, where = 0.0, None
        for i, text in user_turns.items():
            share = sum(keyword_in(k, text) for k in kws) / len(kws) if kws else 0.0
            if share > best:
                best, where = share, i
        if where is None:
            missed += 1
        else:
            out[where].append(op)
    return out, missed


@dataclass
class TurnExample:
    prompt: list[ChatMessage]  # the extractor's messages for this turn
    subject: str
    said: str  # the person's message as the extractor checks facts against it
    before: str  # the assistant's message before it ("" if none)
    gold: list[str]  # the facts this turn states (attributed operations' contents)
    gold_keywords: list[list[str]]
    source: str  # user/session_id#turn

    def row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TurnExamples:
    examples: list[TurnExample] = field(default_factory=list)
    records: int = 0
    unattributed: int = 0  # operations whose keywords no user turn holds


def turn_examples(records: Iterable[TrainingRecord], *, assistant_words: int = 40) -> TurnExamples:
    """One example per user turn of each record (see the module doc)."""
    out = TurnExamples()
    for rec in records:
        out.records += 1
        session = session_of(rec)
        name = known_name(session, rec.state_before)
        user_idx = [i for i, m in enumerate(session.messages) if m.role == "user"]
        if not user_idx:
            continue
        prompts = {
            i: turn_prompt(session, i, name, assistant_words=assistant_words) for i in user_idx
        }
        subject_words = {w.lower() for p in prompts.values() for w in words(p.subject)}
        turns, missed = attribute_ops(
            rec.ops, {i: session.messages[i].content for i in user_idx}, subject_words
        )
        out.unattributed += missed
        for i in user_idx:
            p = prompts[i]
            out.examples.append(
                TurnExample(
                    prompt=p.messages,
                    subject=p.subject,
                    said=p.said,
                    before=p.before.content if p.before is not None else "",
                    gold=[op.content for op in turns[i]],
                    gold_keywords=[list(op.keywords) for op in turns[i]],
                    source=f"{rec.user}/{rec.session_id}#{i}",
                )
            )
    return out


# --- training ------------------------------------------------------------------------


@dataclass
class GRPOSettings:
    """Paper defaults (DeltaMem §3.3): group 8, temperature 1.0, clip ε 0.2, lr 1e-6,
    KL-regularised (β > 0)."""

    model: str  # a Hugging Face model directory, or a .gguf file (dequantised)
    records: Path
    out: Path
    gguf_file: str | None = None  # a GGUF file name inside the `model` directory
    steps: int = 100  # optimiser steps; one prompt (turn) x `group` completions each
    group: int = 8
    lr: float = 1e-6
    beta: float = 0.04
    epsilon: float = 0.2
    temperature: float = 1.0
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    max_prompt: int = 1024  # tokens: longer prompts are left out (never cut)
    max_completion: int = 240  # tokens: the extractor's own reply cap
    assistant_words: int = 40
    embedder: str | None = None  # deltamem embedder spec (default: the local MiniLM)
    resume: str | None = None  # a checkpoint directory, or "last" (the newest in OUT)
    save_steps: int = 25
    seed: int = 0
    gradient_checkpointing: bool = False
    limit: int | None = None  # use the first N examples only
    skip_empty: bool = False  # leave out turns whose gold is "no facts"
    # which records train: "train" leaves out the sessions `train eval --split heldout`
    # scores (a stable hash of user and session id, `heldout_share` of them)
    split: Split = "all"
    heldout_share: float = HELDOUT_SHARE
    # the reward's own rule set (deltamem/train/reward_rules.py), recorded in OUT
    reward_rules: RewardRules = field(default_factory=RewardRules)


@dataclass
class GRPOResult:
    adapter: Path
    steps: int
    examples: int
    dropped_long: int
    unattributed: int
    rewards: list[float]  # mean reward of each logged step
    seconds: float


def split_model_path(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    """`--model x/y.gguf` is the same as `--model x --gguf-file y.gguf`."""
    if gguf_file is None and model.endswith(".gguf"):
        p = Path(model)
        return str(p.parent), p.name
    return model, gguf_file


def load_model(model: str, gguf_file: str | None = None) -> tuple[Any, Any]:
    """A causal LM in float32 and its tokenizer, from a Hugging Face directory or a
    GGUF file (dequantised by transformers: Qwen2, Llama and others it knows)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, name = split_model_path(model, gguf_file)
    kwargs: dict[str, Any] = {"gguf_file": name} if name else {}
    tok = AutoTokenizer.from_pretrained(path, **kwargs)
    lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kwargs)
    quantizer = getattr(lm, "hf_quantizer", None)
    if quantizer is not None:  # TRL refuses a "quantized" model; its weights are fp32 now
        quantizer.remove_quantization_config(lm)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return lm, tok


def base_config(lm: Any) -> dict[str, Any]:
    """The model's config as llama.cpp's converters want it (no quantization)."""
    config = lm.config.to_dict()
    config.pop("quantization_config", None)
    if not config.get("architectures"):
        config["architectures"] = [type(lm).__name__]
    return dict(config)


def prompt_tokens(tok: Any, messages: list[ChatMessage]) -> int:
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


def train_grpo(
    settings: GRPOSettings,
    *,
    embed: EmbedFn | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> GRPOResult:
    """Train a LoRA adapter with GRPO on the turns of `settings.records`; the final
    adapter goes to OUT/adapter, checkpoints to OUT/checkpoint-N, one line per step
    to OUT/rewards.jsonl. `on_step` sees each logged step (progress)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    s = settings
    started = time.monotonic()
    out = Path(s.out)
    out.mkdir(parents=True, exist_ok=True)
    if embed is None:
        from deltamem.embed import make_embedder

        embed = make_embedder(s.embedder).embed

    chosen = select(load_records(s.records), s.split, s.heldout_share)
    made = turn_examples(chosen, assistant_words=s.assistant_words)
    examples = [e for e in made.examples if e.gold or not s.skip_empty]
    if s.limit is not None:
        examples = examples[: s.limit]
    lm, tok = load_model(s.model, s.gguf_file)
    fitting = [e for e in examples if prompt_tokens(tok, e.prompt) <= s.max_prompt]
    dropped = len(examples) - len(fitting)
    if not fitting:
        raise ValueError(
            f"no training example: {len(examples)} turns from {made.records} records, "
            f"{dropped} longer than --max-prompt {s.max_prompt} tokens"
        )
    log.info("%d examples (%d longer than max_prompt left out)", len(fitting), dropped)

    (out / BASE_CONFIG_DIR).mkdir(exist_ok=True)
    (out / BASE_CONFIG_DIR / "config.json").write_text(json.dumps(base_config(lm), indent=2))
    meta = {
        "model": s.model,
        "gguf_file": split_model_path(s.model, s.gguf_file)[1],
        "records": str(s.records),
        "examples": len(fitting),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(s).items()},
    }
    (out / TRAIN_META).write_text(json.dumps(meta, indent=2, default=str))

    reward_fn = ExtractionReward(embed, s.reward_rules)
    use_cpu = not torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=s.steps,
        learning_rate=s.lr,
        beta=s.beta,
        epsilon=s.epsilon,
        temperature=s.temperature,
        num_generations=s.group,
        # one prompt per step: its `group` completions are the batch
        per_device_train_batch_size=s.group,
        gradient_accumulation_steps=1,
        max_completion_length=s.max_completion,
        loss_type="grpo",
        logging_steps=1,
        save_steps=s.save_steps,
        save_total_limit=2,
        report_to="none",
        use_cpu=use_cpu,
        seed=s.seed,
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
        **({"gradient_checkpointing": True} if s.gradient_checkpointing else {}),
    )
    peft_config = LoraConfig(
        r=s.lora_r,
        lora_alpha=s.lora_alpha,
        lora_dropout=s.lora_dropout,
        target_modules=list(s.target_modules),
        task_type="CAUSAL_LM",
    )
    rows = [e.row() for e in fitting]
    for r in rows:
        r.pop("source")
    dataset = Dataset.from_list(rows)
    rewards: list[float] = []

    class _Log(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            logs = logs or {}
            if "reward" not in logs:
                return
            parts = reward_fn.last
            line = {
                "step": state.global_step,
                "reward": logs.get("reward"),
                "reward_std": logs.get("reward_std"),
                "format": float(np.mean([p.format for p in parts])) if parts else None,
                "retrieval": float(np.mean([p.retrieval for p in parts])) if parts else None,
                "r_trans": float(np.mean([p.r_trans for p in parts])) if parts else None,
                # the reward's rules that scored these completions, and how many of
                # their facts each refused (reward hacking shows as a rule never failing)
                "rules": list(reward_fn.rules.enabled),
                "facts": sum(len(p.facts) for p in parts),
                "refused_by": refusals(parts),
                "kl": logs.get("kl"),
                "loss": logs.get("loss"),
                "completion_length": logs.get("completions/mean_length"),
                "seconds": round(time.monotonic() - started, 1),
            }
            rewards.append(float(logs["reward"]))
            with (out / REWARD_LOG).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
            if on_step is not None:
                on_step(line)

    trainer = GRPOTrainer(
        model=lm,
        reward_funcs=[reward_fn],
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[_Log()],
    )
    resume: str | bool | None = s.resume
    if resume == "last":
        resume = True
    trainer.train(resume_from_checkpoint=resume)
    adapter = out / ADAPTER_DIR
    trainer.save_model(str(adapter))
    return GRPOResult(
        adapter=adapter,
        steps=int(trainer.state.global_step),
        examples=len(fitting),
        dropped_long=dropped,
        unattributed=made.unattributed,
        rewards=rewards,
        seconds=time.monotonic() - started,
    )


def iter_reward_log(out: Path) -> Iterator[dict[str, Any]]:
    path = Path(out) / REWARD_LOG
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)
