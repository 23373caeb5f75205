"""`deltamem synth`: dialogues with operation-level memory labels from persona
seeds (SPEC §6). `synthesize` runs the pipeline and writes OUT's files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltamem.bench.progress import Progress
from deltamem.llm.base import LLM
from deltamem.train.synth.pipeline import SynthConfig, SynthError, Synthesizer

__all__ = ["SynthConfig", "SynthError", "Synthesizer", "synthesize"]


def synthesize(
    llm: LLM,
    seeds: Sequence[str],
    out: Path,
    config: SynthConfig | None = None,
    *,
    resume: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the pipeline over `seeds` (one persona each) and write OUT/halumem.jsonl,
    OUT/records.jsonl and OUT/report.json; returns the report."""
    from deltamem.train.synth.output import write_outputs

    before = llm.usage.snapshot()
    results = Synthesizer(llm, out, config, resume=resume, progress=progress).run(seeds)
    used = llm.usage.since(before)
    this_run = {
        "calls": used.calls,
        "prompt_tokens": used.prompt_tokens,
        "completion_tokens": used.completion_tokens,
        "seconds": round(used.seconds, 2),
    }
    return write_outputs(out, results, {"llm_this_run": this_run})
