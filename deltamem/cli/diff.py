"""`deltamem diff A B`: the state distance between two memory states."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deltamem.cli.options import OPTS
from deltamem.cli.render import emit_json, fail

if TYPE_CHECKING:
    from deltamem.embed import Embedder

SOURCE_HELP = (
    "A JSON snapshot (FILE.json: `deltamem memories --json`, or a list of strings), "
    "STORE::USER (a SQLite file or postgresql:// URL, and a user in it), "
    "or USER (a user of the --db store)."
)


def read_state(
    source: str, default_db: str | None, agent: str | None, embedder: Embedder
) -> list[str]:
    """The memory sentences a source names (see SOURCE_HELP)."""
    from deltamem.memory import Memory
    from deltamem.train.diff import load_snapshot

    if source.endswith(".json"):
        return load_snapshot(Path(source))
    db, user = source.rsplit("::", 1) if "::" in source else (default_db, source)
    if db is not None and "://" not in db and not Path(db).exists():
        raise typer.BadParameter(f"no store at {db}")
    mem = Memory(db, embedder=embedder)  # only read: the LLM is never loaded
    try:
        return [m.content for m in mem.get_all(user_id=user, agent_id=agent)]
    finally:
        mem.close()


def diff(
    a: str = typer.Argument(..., help="The predicted state. " + SOURCE_HELP),
    b: str = typer.Argument(..., help="The target state, in the same forms."),
    tau: float = typer.Option(0.75, "--tau", min=0.0, max=1.0, help="Cosine to pair entries."),
    min_f1: float | None = typer.Option(
        None, "--min-f1", min=0.0, max=1.0, help="Exit 1 when F1 is below this (for CI)."
    ),
    agent: str | None = typer.Option(None, "--agent", help="Agent id within the stores."),
    as_json: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
) -> None:
    """Compare two memory states: shared, matched (similarity, keyword fidelity),
    missing and extra entries, and P / R / F1."""
    from deltamem.embed import make_embedder
    from deltamem.train.diff import SnapshotError, diff_states

    embedder = make_embedder(OPTS.embedder)
    try:
        pred = read_state(a, OPTS.db, agent, embedder)
        target = read_state(b, OPTS.db, agent, embedder)
    except (SnapshotError, ValueError) as exc:
        fail(str(exc))
    result = diff_states(pred, target, embed=embedder.embed, tau=tau)
    if as_json:
        emit_json(result.as_dict())
    else:
        show(result)
    if min_f1 is not None and result.f1 < min_f1:
        Console(stderr=True).print(f"F1 {result.f1:.3f} is below --min-f1 {min_f1:.3f}")
        raise typer.Exit(1)


def show(result: object) -> None:
    from deltamem.train.diff import StateDiff

    assert isinstance(result, StateDiff)
    out = Console(soft_wrap=True)
    table = Table(title=f"matched (τ {result.tau:.2f})")
    for col in ("predicted", "target", "similarity", "fidelity"):
        table.add_column(col)
    for m in result.matched:
        table.add_row(escape(m.pred), escape(m.target), f"{m.similarity:.2f}", f"{m.fidelity:.2f}")
    out.print(table)
    for title, items in (("missing", result.missing), ("extra", result.extra)):
        out.print(f"[bold]{title}[/bold] ({len(items)})")
        for text in items:
            out.print(f"  - {escape(text)}")
    out.print(
        f"shared {len(result.shared)}  matched {len(result.matched)}  "
        f"P {result.precision:.3f}  R {result.recall:.3f}  F1 {result.f1:.3f}"
    )
