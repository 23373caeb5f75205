"""How fast the embedded model writes the extractor's replies: llama-cpp-python's
own loop, ours one prompt at a time, ours side by side.

    python benchmarks/decode_speed.py --locomo ../shared/data/locomo/locomo10-dev.json \
        --conversation conv-30 --session 1 --turns 14 --mode batch --out /tmp/batch.json

Builds the extraction prompts of one session's first N user turns exactly as the
manager does (`turn_prompt`), asks them greedily under the reply schema and prints
seconds, tokens generated and tokens per second. `--mode`:
  llama-cpp-python  create_chat_completion, one prompt after another (the engine
                    before deltamem's own decoding loop)
  one               deltamem's loop, one prompt after another
  batch             deltamem's loop, all prompts in one call (four decoded at a time)
`--out` keeps the replies, so two modes can be compared reply by reply
(`--against FILE`). Meant to be timed as a whole process as well.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from prompt_cost import add_source_options, record_of, sessions_of  # benchmarks/, beside this

from deltamem.llm import weights
from deltamem.llm.llamacpp import LlamaCppLLM, default_threads
from deltamem.manager.extract import SCHEMA, turn_prompt

MAX_TOKENS = 240  # the extractor's cap


def prompts_of(args: argparse.Namespace) -> list[list[Any]]:
    sessions = sessions_of(args)
    index = args.session - 1 if args.locomo else args.session
    record = record_of(sessions[index])
    turns = [i for i, m in enumerate(record.messages) if m.role == "user"]
    return [turn_prompt(record, i, None).messages for i in turns[: args.turns or None]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_options(ap)
    ap.add_argument("--session", type=int, default=1, help="LoCoMo: number; HaluMem: index")
    ap.add_argument("--turns", type=int, default=0, help="first N user turns (0: all)")
    ap.add_argument("--mode", choices=["llama-cpp-python", "one", "batch"], default="batch")
    ap.add_argument("--out", type=Path, help="write the replies and figures here (JSON)")
    ap.add_argument("--against", type=Path, help="another mode's --out: count equal replies")
    args = ap.parse_args()

    prompts = prompts_of(args)
    path = weights.assemble()
    if args.mode == "llama-cpp-python":
        from llama_cpp import Llama

        threads = default_threads()
        llama = Llama(
            model_path=str(path),
            n_ctx=8192,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        t0 = time.perf_counter()
        replies, generated = [], 0
        for messages in prompts:
            out: Any = llama.create_chat_completion(
                messages=messages,
                max_tokens=MAX_TOKENS,
                temperature=0.0,
                response_format={"type": "json_object", "schema": SCHEMA},
            )
            replies.append(out["choices"][0]["message"]["content"] or "")
            generated += out["usage"]["completion_tokens"]
    else:
        llm = LlamaCppLLM(path, n_ctx=8192)
        t0 = time.perf_counter()
        if args.mode == "one":
            outs = [
                llm._chat_many(
                    [m], schema=SCHEMA, max_tokens=MAX_TOKENS, temperature=0.0, timeout=600
                )[0]
                for m in prompts
            ]
        else:
            outs = llm._chat_many(
                prompts, schema=SCHEMA, max_tokens=MAX_TOKENS, temperature=0.0, timeout=600
            )
        replies = [o.text for o in outs]
        generated = sum(o.completion_tokens for o in outs)
    seconds = time.perf_counter() - t0
    figures = {
        "mode": args.mode,
        "prompts": len(prompts),
        "seconds": round(seconds, 2),
        "generated": generated,
        "tokens_per_second": round(generated / seconds, 2),
    }
    if args.against:
        theirs = json.loads(args.against.read_text())["replies"]
        figures["equal_replies"] = sum(a == b for a, b in zip(replies, theirs, strict=True))
    print(json.dumps(figures))
    if args.out:
        args.out.write_text(json.dumps({**figures, "replies": replies}, indent=1))


if __name__ == "__main__":
    main()
