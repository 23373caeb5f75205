"""Tune the decomposed judges' P(yes) thresholds on the labels' tune half.

Reads the verdict cache an agreement run on the tune half left behind
(`deltamem bench agreement --judge local --judge-mode decomposed --split tune
--out DIR`), so it makes no model call: every threshold on a grid is tried on
the cached probabilities and the one with the best Cohen's kappa (ties: the one
nearest 0.5) is printed per judge, with its kappa on the tune half. Paste them
into `deltamem/bench/judges/decomposed.py: THRESHOLDS`, then measure the test
half once.

    python benchmarks/tune_judges.py runs/agree-p-tune --model qwen2.5-coder-1.5b-instruct-q4_k_m
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from deltamem.bench.agreement import _norm, _Sessions, _verdict, ask, cohen_kappa, load_labels
from deltamem.bench.judges.base import CACHE, JudgeCache
from deltamem.bench.judges.decomposed import THRESHOLDS, DecomposedJudges
from deltamem.llm.base import LLM, ChatMessage, Completion, LLMError

GRID = [round(0.05 * i, 2) for i in range(1, 20)]
# which thresholds each judge reads
KEYS = {
    "qa": ["same_answer", "same_answer_unshared", "same_polarity"],
    "locomo": ["same_answer_locomo"],
    "integrity": ["covers_full", "covers_part"],
    "update": ["update", "conflict"],
    "accuracy": ["supported_full", "supported_part"],
    "included": ["same_field"],  # the accuracy judge's `included` flag
}


class CacheOnly(LLM):
    """Answers nothing itself: every check must be in the cache already."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def _chat(self, messages: list[ChatMessage], **_: Any) -> Completion:
        raise LLMError("not in the cache")

    def _options(
        self, messages: list[ChatMessage], options: list[str], *, timeout: float
    ) -> tuple[dict[str, float], Completion]:
        raise LLMError("not in the cache")


def kappa_for(
    judge: str, items: list[dict], cache: JudgeCache, llm: LLM, sessions: _Sessions, t: dict
) -> tuple[float | None, int]:
    judges = DecomposedJudges(llm, cache, thresholds=t)
    gold, pred = [], []
    for item in items:
        if judge == "included" and "included" not in item:
            continue
        try:
            reply = ask("accuracy" if judge == "included" else judge, item, judges, sessions)
        except LLMError:
            continue
        if reply is None:
            continue
        if judge == "included":
            gold.append(bool(item["included"]))
            pred.append(bool(reply["included"]))
            continue
        gold.append(_norm(judge, item["label"]))
        pred.append(_norm(judge, _verdict(judge, reply)))
    return cohen_kappa(gold, pred), len(gold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="agreement --out dir of a tune-half run")
    ap.add_argument("--model", required=True, help="the judge model's name (as cached)")
    ap.add_argument("--labels", type=Path, default=Path("bench/labels"))
    ap.add_argument("--data", type=Path, default=Path("../shared/data/halumem"))
    ap.add_argument("--judges", default="qa,locomo,update,integrity,accuracy")
    args = ap.parse_args()
    cache = JudgeCache(args.run / CACHE)
    llm = CacheOnly(args.model)
    sessions = _Sessions(args.data)
    labels = load_labels(args.labels)
    for judge in args.judges.split(","):
        source = "accuracy" if judge == "included" else judge
        items = [i for i in labels.get(source, []) if i.get("split") == "tune"]
        keys = KEYS[judge]
        best: tuple[float, float, dict] | None = None
        for values in itertools.product(GRID, repeat=len(keys)):
            t = dict(zip(keys, values, strict=True))
            if len(keys) == 2 and keys[0].endswith("_full") and t[keys[1]] > t[keys[0]]:
                continue  # a "partly" cut above the "fully" cut means nothing
            k, n = kappa_for(judge, items, cache, llm, sessions, t)
            if k is None or n == 0:
                continue
            nearness = -sum(abs(v - 0.5) for v in values)
            if best is None or (k, nearness) > (best[0], best[1]):
                best = (k, nearness, t)
        if best is None:
            print(f"{judge}: nothing cached")
            continue
        base, _ = kappa_for(judge, items, cache, llm, sessions, dict(THRESHOLDS))
        print(f"{judge}: best {best[2]} kappa {best[0]:.3f} (current thresholds {base})")


if __name__ == "__main__":
    main()
