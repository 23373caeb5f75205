"""The extractor's prompt cost per session token, counted without running the model.

    python benchmarks/prompt_cost.py --locomo ../shared/data/locomo/locomo10-dev.json \
        --conversation conv-30
    python benchmarks/prompt_cost.py --halumem ../shared/data/halumem/pilot_slice_user3.jsonl \
        --sessions 12

The per-turn manager sends one extraction prompt per user turn, in order. llama.cpp
keeps the KV cache of the previous call (its prompt and reply) and evaluates only
what follows the longest prefix the new prompt shares with it. This builds every
prompt exactly as the manager does (`deltamem.manager.extract.turn_prompt`),
applies the model's chat template, tokenizes with the model's own vocabulary (no
weights loaded) and sums the tokens past the shared prefix: the "evaluated prompt
tokens" the bench logs. Session tokens are counted as the manager counts them (each
message as "role: content" in the model's tokens).

It assumes nothing else uses the model between two extraction calls, which holds
for the default manager (decisions taken in code). With `decide="model"` the
decision calls come between sessions and the first prompt of each session loses
its cache, so a run of that manager costs more than this count.
Checked against a live run (conv-30, sessions 1-4, 2026-11-24): 5,020 evaluated
prompt tokens and 2,525 session tokens counted, the same logged.

Since the extractor's calls are decoded four at a time (deltamem/llm/llamacpp_decoder.py)
a prompt takes its prefix from whichever of four cached sequences shares most of it,
so a live run evaluates fewer tokens than this single-cache count (conv-30: 1.77 per
session token logged, 1.90 counted): read it as an upper bound.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deltamem.bench.datasets import halumem, locomo
from deltamem.bench.datasets.base import BenchSession
from deltamem.llm import weights
from deltamem.llm.llamacpp import chat_prompt_text
from deltamem.llm.llamacpp_decoder import shared_prefix
from deltamem.manager.extract import turn_prompt
from deltamem.memory import parse_messages
from deltamem.types import SessionRecord

# the reply follows the prompt in the cache; one token of it is enough to end the shared prefix
REPLY_TOKENS = 1


def sessions_of(args: argparse.Namespace) -> list[BenchSession]:
    if args.locomo:
        convs = locomo.load(args.locomo)
        conv = next(c for c in convs if c.sample_id == args.conversation)
        out = [locomo.to_bench_session(conv, s, both_as_user=True) for s in conv.sessions]
    else:
        user = next(halumem.iter_users(args.halumem))
        out = [
            halumem.to_bench_session(s, i, user.name)
            for i, s in enumerate(user.sessions)
            if s.evaluated
        ]
    first = getattr(args, "sessions", 0)
    return out[:first] if first else out


def add_source_options(ap: argparse.ArgumentParser) -> None:
    """--locomo FILE [--conversation ID] or --halumem FILE: where sessions_of reads."""
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--locomo", type=Path, help="LoCoMo JSON (both speakers as users)")
    src.add_argument("--halumem", type=Path, help="HaluMem JSONL (its first user)")
    ap.add_argument("--conversation", default="conv-30")


def record_of(bench: BenchSession) -> SessionRecord:
    """A bench session as the manager reads it."""
    assert bench.timestamp is not None, "the session has no date"
    return SessionRecord(
        user_id="u",
        session_id=bench.session_id,
        timestamp=bench.timestamp,
        messages=parse_messages(bench.messages),
        content_hash="-",
    )


class Tokenizer:
    """The embedded model's chat template and vocabulary, without its weights."""

    def __init__(self, path: Path) -> None:
        from llama_cpp import Llama

        self.llama = Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8", "replace"), add_bos=False))

    def __call__(self, messages: list[Any]) -> list[int]:
        prompt = chat_prompt_text(self.llama, messages)
        return self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_options(ap)
    ap.add_argument("--sessions", type=int, default=0, help="first N sessions (0: all)")
    args = ap.parse_args()

    tokens = Tokenizer(weights.assemble())
    cache: list[int] = []
    evaluated = session_tokens = calls = 0
    for bench in sessions_of(args):
        record = record_of(bench)
        session_tokens += sum(tokens.count(f"{m.role}: {m.content}") for m in record.messages)
        for i, message in enumerate(record.messages):
            if message.role != "user":
                continue
            prompt = tokens(turn_prompt(record, i, None).messages)
            evaluated += len(prompt) - shared_prefix(cache, prompt)
            cache = prompt + [-1] * REPLY_TOKENS
            calls += 1
    print(
        f"{calls} extraction calls, {evaluated} evaluated prompt tokens, "
        f"{session_tokens} session tokens: "
        f"{evaluated / max(1, session_tokens):.3f} per session token"
    )


if __name__ == "__main__":
    main()
