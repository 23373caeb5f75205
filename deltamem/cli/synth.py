"""`deltamem synth`: dialogues with memory-operation labels from persona seeds
(the pipeline is deltamem/train/synth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deltamem.cli.options import OPTS
from deltamem.cli.render import progress_bars

console = Console(stderr=True)


def synth(
    personas: Annotated[int, typer.Option(min=1, help="Personas to synthesise.")] = 2,
    events: Annotated[int, typer.Option(min=1, help="Events (sessions) per persona.")] = 25,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("synth-out"),
    llm: Annotated[
        str | None,
        typer.Option(help="The generating model (default: the global --llm, else local)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the run in OUT; finished steps are not asked again.")
    ] = False,
    seeds: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Persona seeds: one a line, or JSONL with persona_info/seed (default: built in).",
        ),
    ] = None,
    attempts: Annotated[
        int, typer.Option(min=1, help="Generations of a step before it is dropped.")
    ] = 3,
    batch: Annotated[int, typer.Option(min=1, help="Events asked for in one call.")] = 5,
    facts: Annotated[int, typer.Option(min=3, help="Facts of the initial memory state.")] = 8,
    questions: Annotated[int, typer.Option(min=0, help="Questions per session.")] = 2,
    distractors: Annotated[int, typer.Option(min=0, help="Distractors per event.")] = 1,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 0.7,
    dialogue: Annotated[
        str,
        typer.Option(
            help="'turns': a call per fact (for small models); 'whole': one call per dialogue."
        ),
    ] = "turns",
) -> None:
    """Synthesise dialogues with memory-operation labels: persona → profile and
    initial state → events with state deltas → operations → dialogues, every reply
    checked in code. Writes OUT/halumem.jsonl (for `deltamem bench halumem`),
    OUT/records.jsonl (training records), OUT/report.json and OUT/refusals.jsonl."""
    from deltamem.bench.log import log_calls
    from deltamem.llm import make_llm
    from deltamem.llm.base import LLMError
    from deltamem.train.synth import SynthConfig, SynthError, synthesize
    from deltamem.train.synth.seeds import BUILT_IN, load_seeds, pick

    if dialogue not in ("turns", "whole"):
        raise typer.BadParameter("is 'turns' or 'whole'", param_hint="--dialogue")
    pool = load_seeds(seeds) if seeds else list(BUILT_IN)
    if not pool:
        raise typer.BadParameter(f"no seeds in {seeds}", param_hint="--seeds")
    config = SynthConfig(
        events=events,
        batch=batch,
        attempts=attempts,
        initial_facts=facts,
        questions=questions,
        distractors=distractors,
        temperature=temperature,
        dialogue="whole" if dialogue == "whole" else "turns",
    )
    try:
        model = make_llm(llm or OPTS.llm, timeout=OPTS.llm_timeout, adapter=OPTS.adapter)
    except LLMError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    log_calls(model, out)
    totals = {"personas": personas, "sessions": personas * (events + 1)}
    try:
        with progress_bars(totals) as bars:
            report = synthesize(
                model, pick(pool, personas), out, config, resume=resume, progress=bars
            )
    except SynthError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    gen, ses = report["generations"], report["sessions"]
    console.print(
        f"[bold]{ses['kept']}[/bold] of {ses['planned']} sessions kept; "
        f"acceptance {gen['acceptance_rate']} ({gen['accepted']} accepted, "
        f"{gen['refused']} refused); {report['records']} records"
    )
    console.print(f"→ {out / 'halumem.jsonl'}, {out / 'records.jsonl'}, {out / 'report.json'}")
    if report["drops"]:
        console.print_json(json.dumps(report["drops"][:10]))
