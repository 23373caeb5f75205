"""The synthesis pipeline (SPEC §6; DeltaMem §3.2 and App. A; HaluMem §4).

Per persona seed:
1. profile and initial memory state S0 (its own "first conversation" session,
   so a memory system that starts empty can learn S0 from dialogue);
2. chronological events in batches, each with state deltas (career / health /
   relationship / preference; new, expand, adjust, shift, partial deletion, a
   change quoting the exact prior fact);
3. one anchor memory followed across related events (inter-event evolution:
   emotional, meaning or self-belief updates), then per event the memory
   operations (add / update / none with keywords: the deltas, memory filling, a
   few repeats) and distractors;
4. per event a dialogue in which the user brings up every fact first, with a
   fact → turn map; then questions of HaluMem's six types with their evidence.

Every reply is checked (`checks.py`) before it is kept; a refused one is asked
again up to `attempts` times, then the step is dropped with its reason. A
session is kept only with its operations and dialogue; the state moves on only
through kept sessions. Every step's outcome is cached (`cache.py`), so a run
resumes where it stopped. This module runs a step (generate, check, regenerate,
keep or drop); `persona.py` walks one persona's steps; `output.py` writes OUT.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deltamem.bench.progress import Progress, tick
from deltamem.llm.base import LLM, ChatMessage, LLMError
from deltamem.text import clip
from deltamem.train.synth.cache import Cache, Entry
from deltamem.train.synth.checks import Refused
from deltamem.train.synth.data import (
    Parse,
    PersonaResult,
    SessionResult,
    SynthConfig,
    SynthError,
    apply_ops,
)
from deltamem.train.synth.persona import PersonaRun
from deltamem.train.synth.seeds import persona_id

__all__ = [
    "PersonaResult",
    "SessionResult",
    "SynthConfig",
    "SynthError",
    "Synthesizer",
    "apply_ops",
]
REFUSALS = "refusals.jsonl"


class Synthesizer:
    def __init__(
        self,
        llm: LLM,
        out: Path,
        config: SynthConfig | None = None,
        *,
        resume: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.llm, self.out = llm, out
        self.config = config or SynthConfig()
        self.resume, self.progress = resume, progress
        self.cache_dir = out / "cache"

    def run(self, seeds: Sequence[str]) -> list[PersonaResult]:
        if not self.resume and self.cache_dir.exists() and any(self.cache_dir.iterdir()):
            raise SynthError(
                f"{self.out} holds an earlier synthesis; pass --resume to continue it "
                "or choose another --out"
            )
        self.out.mkdir(parents=True, exist_ok=True)
        results = []
        for i, seed in enumerate(seeds):
            results.append(self.persona(persona_id(i, seed), seed))
            tick(self.progress, "personas")
        return results

    # --- one step: generate, check, regenerate, keep or drop -----------------------------
    def step(
        self,
        cache: Cache,
        key: str,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        parse: Parse,
    ) -> Entry:
        """The cached outcome of step `key`, else a new one (generated, checked,
        cached and logged)."""
        entry = cache.get(key)
        if entry is None:
            entry = self._generate(key, messages, schema, parse)
            cache.put(entry)
            self._log(cache.path.stem, entry)
        return entry

    def _generate(
        self, key: str, messages: list[ChatMessage], schema: dict[str, Any], parse: Parse
    ) -> Entry:
        step = key.split(":", 1)[0]
        refusals: list[str] = []

        def check(raw: dict[str, Any]) -> None:
            try:
                parse(raw)
            except ValidationError as exc:
                refusals.append("bad JSON shape: " + clip(str(exc), 300))
                raise
            except Refused as exc:
                refusals.append(clip(str(exc), 300))
                raise

        t0 = time.perf_counter()
        for _ in range(self.config.attempts):
            seen = len(refusals)
            try:
                raw = self.llm.complete_json(
                    messages,
                    schema,
                    purpose=f"synth.{step}",
                    max_tokens=self.config.max_tokens.get(step, 2000),
                    temperature=self.config.temperature,
                    check=check,
                )
            except LLMError as exc:
                if len(refusals) == seen:  # no JSON object, a timeout, a transport error
                    refusals.append(clip(str(exc), 300))
                continue
            value, pruned = parse(raw)
            return Entry(key, True, value, refusals, pruned, seconds=time.perf_counter() - t0)
        last = refusals[-1] if refusals else "no reply"
        reason = f"refused {len(refusals)} time(s); last: {last}"
        return Entry(key, False, None, refusals, [], reason, time.perf_counter() - t0)

    def _log(self, persona: str, entry: Entry) -> None:
        rows = [("refused", r) for r in entry.refusals] + [("pruned", p) for p in entry.pruned]
        if not entry.ok:
            rows.append(("dropped", entry.reason or ""))
        if not rows:
            return
        with (self.out / REFUSALS).open("a", encoding="utf-8") as fh:
            for kind, reason in rows:
                row = {"persona": persona, "step": entry.key, "kind": kind, "reason": reason}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    # --- one persona ------------------------------------------------------------------------
    def persona(self, pid: str, seed: str) -> PersonaResult:
        return PersonaRun(self, pid, seed).run()
