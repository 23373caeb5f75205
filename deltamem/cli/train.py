"""`deltamem train …`: the training kit's commands (records; GRPO lives in the
train extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(no_args_is_help=True, help="Training kit: records for the manager's model.")
console = Console(stderr=True)


@app.command()
def records(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="HaluMem JSONL")],
    out: Annotated[Path, typer.Option("--out", help="Records JSONL to write.")] = Path(
        "train-records.jsonl"
    ),
    users: Annotated[int | None, typer.Option(help="First N users.")] = None,
    sessions: Annotated[int | None, typer.Option(help="First N sessions per user.")] = None,
) -> None:
    """Training records (state_before, session, ops, state_after, keywords) from a
    HaluMem file: gold points are the operations, `is_update` ones update the
    memory they quote."""
    from deltamem.train.records import records_from_halumem, write_records

    n = write_records(records_from_halumem(data, users=users, sessions=sessions), out)
    console.print(f"[bold]{n}[/bold] records → {out}")
