"""A memory system of your own, plugged into deltamem's benchmark harness.

`KeywordMemory` keeps every raw turn and answers a search with the turns that
share the most words with the query. It subclasses `MemorySystem` (docs/bench.md,
"Plugging in a system") and runs here on a five-question LoCoMo-format
conversation (examples/data/tiny_locomo.json) without any model: answer-free
(evidence recall, not F1 or a judge), so no LLM is loaded or called.

    python examples/custom_system.py [OUT]

The same class beside the built-in systems, from the command line (this loads
the default model and embedder):

    deltamem bench run locomo examples/data/tiny_locomo.json --no-answers \\
        --systems examples.custom_system:KeywordMemory,retrieval --out runs/keyword
"""

from __future__ import annotations

import dataclasses
import re
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.bench.render import markdown
from deltamem.bench.systems import MemorySystem, Retrieved
from deltamem.bench.task import Models, RunSpec, get_task

DATA = Path(__file__).parent / "data" / "tiny_locomo.json"
STOP = frozenset(
    "a an and at did do does for her his i in is my of on the to what when where which who".split()
)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP}


class KeywordMemory(MemorySystem):
    name = "keyword"
    stores_raw_turns = True  # nothing is extracted: the accuracy judges leave it out

    def __init__(self) -> None:
        super().__init__()  # no LLM: the cost is what the harness measures itself
        self.turns: dict[str, list[Retrieved]] = {}

    def _reset(self, user: str) -> None:
        self.turns.pop(user, None)

    def _add_session(
        self, user: str, session_id: str, messages: list[dict[str, Any]], timestamp: datetime | None
    ) -> dict[str, float]:
        kept = self.turns.setdefault(user, [])
        for i, m in enumerate(messages):  # provenance: the session and the message index
            who = m.get("name") or m["role"]
            text = f"{who}: {m['content']}"
            kept.append(Retrieved(text, timestamp, session_id, [i], kind="episode", speaker=who))
        return {"memories_stored": len(messages)}

    def _session_memories(self, user: str, session_id: str) -> list[str]:
        return [r.text for r in self.turns.get(user, []) if r.session_id == session_id]

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        asked = words(query)
        scored = [
            (len(asked & words(r.content)), i, r) for i, r in enumerate(self.turns.get(user, []))
        ]
        best = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[:k]
        return [dataclasses.replace(r, score=float(n)) for n, _, r in best]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="keyword-"))
    task = get_task("locomo")  # the registry's LoCoMo task: loader, loop, scorers, page
    spec = RunSpec(data=[DATA], out=out, systems=["keyword"], k=3, answer=False)
    metrics = task.run(spec, Models(make=lambda name, workdir: KeywordMemory()))
    print(markdown(task.page(metrics, [])))
    print(f"\nrecords, metrics and report.html in {out}")


if __name__ == "__main__":
    main()
