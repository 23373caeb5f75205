"""The training reward measured on the product's own engine (`deltamem train eval`).

Each user turn of the records is sent to an LLM port exactly as the manager sends
it (`turn_prompt`, the extractor's schema and reply cap, greedy decoding), and the
reply is scored with the GRPO reward (`ExtractionReward`: 0.1·format +
0.1·share of facts passing the reward's own rules + 0.8·r_trans against that
turn's gold facts; each row names the rules and what each refused fact failed). Run it on
held-back records with and without an adapter (`make_llm(adapter=...)`) to see
what training changed where the model was not trained.

Records are split into "train" and "heldout" by a hash of user and session id, so
`train grpo --split train` and `train eval --split heldout` never share a session,
whatever order the file is in. One line per turn goes to the output file as soon
as it is scored; a rerun with the same output skips the turns already there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.llm.base import LLM, LLMError
from deltamem.manager.extract import SCHEMA, FactsReply
from deltamem.train.distance import EmbedFn
from deltamem.train.grpo import TurnExample, load_records, turn_examples
from deltamem.train.records import HELDOUT_SHARE, Split, select
from deltamem.train.reward import ExtractionReward


@dataclass
class EvalSummary:
    examples: int  # turns scored (this run and earlier ones in the same output)
    failed: int  # turns whose call failed (reward 0)
    reward: float
    format: float
    retrieval: float
    r_trans: float
    seconds: float  # model time over the scored turns

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in vars(self).items()}


def summarise(rows: list[dict[str, Any]]) -> EvalSummary:
    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in rows])) if rows else 0.0

    return EvalSummary(
        examples=len(rows),
        failed=sum(1 for r in rows if r.get("error")),
        reward=mean("reward"),
        format=mean("format"),
        retrieval=mean("retrieval"),
        r_trans=mean("r_trans"),
        seconds=float(sum(r["seconds"] for r in rows)),
    )


def score_turn(
    llm: LLM, example: TurnExample, reward: ExtractionReward, max_tokens: int = 240
) -> dict[str, Any]:
    """One turn: the product's call, then the reward parts. A failed call (timeout,
    a reply the checks refuse) scores 0 and keeps its error."""
    t0 = time.perf_counter()
    error: str | None = None
    try:
        reply = llm.complete_json(
            example.prompt,
            SCHEMA,
            purpose="extract",
            max_tokens=max_tokens,
            check=FactsReply.model_validate,
        )
        text = json.dumps(reply, ensure_ascii=False)
    except (LLMError, ValueError) as exc:
        text, error = "", f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t0
    parts = reward.score(
        text,
        subject=example.subject,
        said=example.said,
        before=example.before,
        gold=example.gold,
        gold_keywords=example.gold_keywords,
    )
    return {
        "source": example.source,
        "reward": parts.reward,
        "format": parts.format,
        "retrieval": parts.retrieval,
        "r_trans": parts.r_trans,
        "facts": parts.facts,
        "kept": parts.kept,
        "rules": parts.rules,  # the reward's rules that scored this reply
        "refused": parts.refused,  # each fact not kept -> the rules it failed
        "gold": example.gold,
        "seconds": round(seconds, 2),
        "error": error,
    }


def evaluate(
    records_path: Path,
    llm: LLM,
    out: Path,
    *,
    embed: EmbedFn,
    split: Split = "heldout",
    share: float = HELDOUT_SHARE,
    limit: int | None = None,
    skip_empty: bool = False,
    on_turn: Callable[[int, int], None] | None = None,
) -> EvalSummary:
    """Score every turn of the chosen records (the first `limit` turns if given),
    appending one JSON line per turn to `out` and skipping turns already there."""
    records = select(load_records(records_path), split, share)
    examples = [e for e in turn_examples(records).examples if e.gold or not skip_empty]
    if limit is not None:
        examples = examples[:limit]
    done: dict[str, dict[str, Any]] = {}
    if out.is_file():
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["source"]] = row
    reward = ExtractionReward(embed)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with out.open("a", encoding="utf-8") as fh:
        for n, example in enumerate(examples, 1):
            row = done.get(example.source)
            if row is None:
                row = score_turn(llm, example, reward)
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                fh.flush()
            rows.append(row)
            if on_turn is not None:
                on_turn(n, len(examples))
    return summarise(rows)
