"""`deltamem bench rules`: the fact rules' fire rates, precision and ablation lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def rules(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Finished `deltamem` runs (OUT of `bench halumem|locomo`) whose logged "
            "extraction replies are replayed through the rules; none: the labelled cases only."
        ),
    ] = None,
    cases: Annotated[
        Path | None,
        typer.Option(help="Labelled keep/refuse cases (JSONL); default: the committed ones."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the figures here as JSON (and the table as .md).")
    ] = None,
    facts: Annotated[
        Path | None,
        typer.Option(
            help="Write every replayed fact, with its turn and the rules that fired, here "
            "(JSON Lines, one file for all runs): the material for labelling kept facts."
        ),
    ] = None,
) -> None:
    """Each fact rule measured without a model call: on the labelled cases (fires,
    precision, misses) and on each run's logged replies (refuses, fires, and how many
    facts it alone holds back: its ablation line). On a HaluMem run, each rule's
    ablation line is also given in memory-state F1 against the gold points."""
    from deltamem.bench.rules_replay import CASES, replay_run, rules_table, score_cases
    from deltamem.bench.rules_state import StateAblation, state_ablation, state_table

    scored = score_cases(cases or CASES)
    replayed = {}
    states: dict[str, StateAblation] = {}
    if runs:
        from deltamem.embed import make_embedder

        embedder = make_embedder()  # one model for every store and the state distance
        for run in runs:
            if not (run / "llm_calls.jsonl").exists():
                raise typer.BadParameter(f"{run}: no llm_calls.jsonl (not a finished bench run)")
            replayed[run.name] = replay_run(run, embedder=embedder)
        for run in runs:
            state = state_ablation(run, replayed[run.name], embedder)
            if state is not None:
                states[run.name] = state
    table = rules_table(scored, replayed)
    if states:
        table += "\n\nMemory-state F1 of the replayed facts (HaluMem runs):\n\n"
        table += state_table(states)
    typer.echo(table)
    wrong = scored.wrong
    typer.echo(
        f"\nlabelled cases: {scored.cases}, decided wrongly: {len(wrong)}"
        + "".join(
            f"\n  {w['id']} expected {w['expect']}, got {w['got']}: {w['fact']}" for w in wrong
        )
    )
    for name, score in replayed.items():
        typer.echo(
            f"{name}: {score.sessions} sessions, {score.written} facts written, "
            f"{score.kept} kept ({score.kept / max(1, score.written):.1%})"
        )
    if facts is not None:
        facts.parent.mkdir(parents=True, exist_ok=True)
        with facts.open("w", encoding="utf-8") as f:
            for name, score in replayed.items():
                for row in score.facts:
                    f.write(json.dumps({"run": name, **row}, ensure_ascii=False) + "\n")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        # vars, not asdict: asdict rebuilds a Counter from (key, count) pairs as keys
        figures = {
            "cases": dict(vars(scored)),
            "runs": {
                name: {k: v for k, v in vars(score).items() if k != "facts"}
                for name, score in replayed.items()
            },
            "state_f1": {name: vars(state) for name, state in states.items()},
        }
        out.write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
        out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
