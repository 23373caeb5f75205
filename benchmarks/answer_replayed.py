"""Answer a run's questions again with today's answerer, its first reply replayed.

    python benchmarks/answer_replayed.py runs/c17-u3-s25-ans runs/c18-u3-s25-yes \
        --system deltamem
    deltamem bench answer runs/c17-u3-s25-ans --out runs/c18-u3-s25-yes --resume \
        --systems deltamem --llm local --judge local \
        --data ../shared/data/halumem/pilot_slice_user3.jsonl

For an answerer change that acts after the model's first reply (the check of an
unsure "Yes"): greedy answers reproduce exactly from the logged hits, so each
question's first reply is the one the run logged, and only the calls the change
adds are made with the embedded model. The result is what `deltamem bench answer`
would write, in minutes instead of an hour. `bench answer --resume` into the same
directory then judges it (copy the source's judge_cache.sqlite there first to reuse
its verdicts). LoCoMo runs are answered over categories 1-4, as the headline.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.answer import Answerer
from deltamem.bench.answering import as_search_hits
from deltamem.bench.log import RESULTS, log_calls, read_records
from deltamem.bench.reanswer import ReanswerRun, is_question, reanswer
from deltamem.bench.systems.base import Retrieved
from deltamem.llm import make_llm
from deltamem.llm.base import LLM, ChatMessage

HEADLINE = (1, 2, 3, 4)


def first_replies(source: Path, system: str, answerer: Answerer) -> dict[str, str]:
    """Each question's prompt (as today's answerer writes it) -> the logged reply."""
    out = {}
    for rec in read_records(source / RESULTS):
        if not is_question(rec) or rec.get("system") != system or rec.get("hits") is None:
            continue
        if "category" in rec and int(rec["category"]) not in HEADLINE:
            continue
        at = datetime.fromisoformat(rec["asked_at"])
        hits = as_search_hits([Retrieved.from_record(h) for h in rec["hits"]], rec["user"], at)
        out[json.dumps(answerer.prompt(rec["question"], hits, at))] = rec.get("prediction") or ""
    return out


class Replayed:
    """The model, but a prompt the run already answered gets the logged reply."""

    def __init__(self, llm: LLM, replies: dict[str, str]) -> None:
        self.llm, self.replies = llm, replies
        self.replayed = self.asked = 0

    @property
    def name(self) -> str:
        return self.llm.name

    @property
    def scores_options(self) -> bool:
        return self.llm.scores_options

    def p_yes(self, messages: list[ChatMessage], *, purpose: str) -> float:
        return self.llm.p_yes(messages, purpose=purpose)

    def complete(self, messages: list[ChatMessage], **kwargs: Any) -> str:
        reply = self.replies.get(json.dumps(messages))
        if reply is not None:
            self.replayed += 1
            return reply
        self.asked += 1
        return self.llm.complete(messages, **kwargs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="an answered run whose questions keep their hits")
    ap.add_argument("out", type=Path)
    ap.add_argument("--system", required=True)
    args = ap.parse_args()
    llm = make_llm("local")
    model = Replayed(llm, first_replies(args.source, args.system, Answerer(llm)))
    args.out.mkdir(parents=True, exist_ok=True)
    log_calls(llm, args.out)
    locomo = any("category" in r for r in read_records(args.source / RESULTS))
    job = ReanswerRun(
        source=args.source,
        out=args.out,
        systems=(args.system,),
        categories=HEADLINE if locomo else (),
    )
    n = reanswer(job, model)  # type: ignore[arg-type]  # the LLM port's surface the answerer uses
    print(f"{n} answered: {model.replayed} first replies replayed, {model.asked} asked again")


if __name__ == "__main__":
    main()
