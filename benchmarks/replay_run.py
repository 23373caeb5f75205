"""Write a run's memory again from its logged extraction replies: today's manager
and search, no model (HaluMem or LoCoMo).

    python benchmarks/replay_run.py runs/c12-u3 \
        --data ../shared/data/halumem/pilot_slice_user3.jsonl --sessions 12 --out runs/c12-u3-code
    python benchmarks/replay_run.py runs/lc30-deltamem \
        --data ../shared/data/locomo/locomo10-dev.json --conversation conv-30 --out runs/lc30-code

The per-turn extractor never sees the stored memories, so what the model wrote for
a user turn does not depend on what was decided before it. This feeds a run's
logged extraction replies back in order (one per user turn, as `llm_calls.jsonl`
holds them) to `deltamem` (and `deltamem-facts` for HaluMem) as they are now: the code's checks,
the decision step (`ManagerConfig.decide`; "code" makes no call), the store, the
search. A step that asks the model anything else stops the run: it cannot be
replayed. One thing may differ from a live run: the person's name the extractor is
told comes from the store, and a different bank could name them differently (the
replay stops if it runs out of replies or has some left).

The output is a run directory as `deltamem bench halumem --no-answers` (or `bench
locomo --both-as-user --no-answers`) writes it: state_f1, evidence coverage, cost;
`deltamem bench answer` answers and judges it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from deltamem.bench.halumem import HaluMemRun, run_halumem
from deltamem.bench.locomo import LocomoRun, run_locomo
from deltamem.embed import make_embedder
from deltamem.llm.base import LLM, ChatMessage, Completion
from deltamem.manager.extract import _SYSTEM as EXTRACT_SYSTEM


class ReplayedExtraction(LLM):
    """Answers each extraction request with the next logged reply; refuses the rest."""

    def __init__(self, calls: list[dict[str, Any]], name: str) -> None:
        super().__init__(timeout=5.0, retries=0)
        self.calls = calls
        self.used = 0
        self.name = name

    def _chat(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> Completion:
        if messages[0]["content"] != EXTRACT_SYSTEM:
            raise SystemExit("the manager asked the model something other than extraction")
        if self.used >= len(self.calls):
            raise SystemExit(f"the log holds {len(self.calls)} extraction replies: too few")
        call = self.calls[self.used]
        self.used += 1
        return Completion(
            text=call["reply"],
            prompt_tokens=int(call.get("prompt_tokens") or 0),
            completion_tokens=int(call.get("completion_tokens") or 0),
            cached_tokens=int(call.get("cached_tokens") or 0),
        )


def extraction_calls(run: Path) -> list[dict[str, Any]]:
    """The run's successful extraction calls, in the order they were made."""
    rows = [json.loads(x) for x in (run / "llm_calls.jsonl").read_text().splitlines() if x]
    return [c for c in rows if c.get("purpose") == "extract" and c.get("ok", True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run directory with llm_calls.jsonl")
    ap.add_argument("--data", required=True, type=Path, help="its HaluMem JSONL or locomo10.json")
    ap.add_argument("--sessions", type=int, help="first N sessions (HaluMem: as the run had)")
    ap.add_argument("--conversation", help="LoCoMo: the run's sample id (both speakers as user)")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    calls = extraction_calls(args.run)
    llm = ReplayedExtraction(calls, calls[0].get("model", "replay") if calls else "replay")
    embedder = make_embedder()
    if args.conversation:
        job = LocomoRun(
            data=args.data,
            out=args.out,
            systems=["deltamem"],
            only=(args.conversation,),
            sessions=args.sessions,
            both_as_user=True,
            answer=False,
        )
        metrics = run_locomo(job, llm=llm, embedder=embedder)
    else:
        run = HaluMemRun(
            data=args.data,
            out=args.out,
            systems=["deltamem", "deltamem-facts"],
            sessions=args.sessions,
            answer=False,
        )
        metrics = run_halumem(run, llm=llm, embedder=embedder)
    if llm.used != len(calls):
        raise SystemExit(f"{len(calls) - llm.used} logged replies were not asked for")
    print(json.dumps(metrics, indent=1)[:4000])


if __name__ == "__main__":
    main()
