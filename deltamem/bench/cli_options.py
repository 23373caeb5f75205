"""What the `deltamem bench` commands share: their options, the checks of the
systems and judges named, the run directory held while a command writes it, the
models of the systems and the judge (every call logged to the run), and the
summary printed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from deltamem.embed import Embedder
    from deltamem.llm.base import LLM

console = Console(stderr=True)

SystemsOpt = Annotated[
    str,
    typer.Option(
        "--systems",
        help="Comma-separated systems: built-in names, or package.module:ClassName for a "
        "MemorySystem of your own.",
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Output directory.")]
LLMOpt = Annotated[str | None, typer.Option("--llm", help="LLM spec of the systems.")]
AdapterOpt = Annotated[
    str | None,
    typer.Option(
        "--adapter",
        help="A GGUF LoRA (`deltamem train export`) on the systems' llama.cpp model "
        "(default: the global --adapter / $DELTAMEM_ADAPTER); judges never get it.",
    ),
]
JudgeOpt = Annotated[str, typer.Option("--judge", help="'none' or an LLM spec for judges.")]
JudgeModeOpt = Annotated[
    str,
    typer.Option(
        "--judge-mode",
        help="rubric (one prompt per verdict, for strong judges), decomposed (code and "
        "small checks, for the embedded model) or auto (decomposed for local).",
    ),
]
# the HaluMem file a finished run's questions are judged against (`bench answer`, `bench
# judge`); LoCoMo's records carry their references
JudgeDataOpt = Annotated[
    Path | None,
    typer.Option(
        "--data",
        exists=True,
        dir_okay=False,
        help="HaluMem JSONL (for its judges; LoCoMo needs none).",
    ),
]
FinishedRunArg = Annotated[
    Path, typer.Argument(exists=True, file_okay=False, help="A finished run directory.")
]
EmbOpt = Annotated[str | None, typer.Option("--embedder", help="Embedder spec.")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout", help="Seconds one LLM call may take (a long session on a small CPU)."
    ),
]
ResumeOpt = Annotated[bool, typer.Option(help="Skip items already in results.jsonl.")]
KOpt = Annotated[int, typer.Option("--k", help="Items retrieved per question.")]


def judge_kinds(spec: str) -> frozenset[str]:
    """The HaluMem judges named in a comma-separated --judges (checked)."""
    from deltamem.bench.judges.halumem import JUDGES

    names = frozenset(n.strip() for n in spec.split(",") if n.strip())
    if not names or names - JUDGES:
        raise typer.BadParameter(
            f"unknown judge in {spec!r}; choose from {', '.join(sorted(JUDGES))}",
            param_hint="--judges",
        )
    return names


def system_names(spec: str) -> list[str]:
    """The systems named in a comma-separated --systems (checked): built-in names
    and `package.module:ClassName` (a MemorySystem from outside)."""
    from deltamem.bench.systems import SYSTEMS
    from deltamem.bench.systems.factory import SystemSpecError, system_class

    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS and ":" not in n]
    if not names or unknown:
        raise typer.BadParameter(
            f"unknown system(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(SYSTEMS)}, or name a class as package.module:ClassName",
            param_hint="--systems",
        )
    for name in names:
        if ":" in name:
            try:
                system_class(name)
            except SystemSpecError as exc:
                raise typer.BadParameter(str(exc), param_hint="--systems") from exc
    return names


@contextmanager
def own_run_dir(out: Path) -> Iterator[None]:
    """This process alone writes to OUT while the command runs."""
    from deltamem.bench.log import RunDirBusy, exclusive_run

    try:
        with exclusive_run(out):
            yield
    except RunDirBusy as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def adapter_or_global(adapter: str | None) -> str | None:
    from deltamem.cli.options import OPTS

    return adapter or OPTS.adapter


def systems_setup(
    systems: str,
    embedder: str | None,
    llm: str | None,
    timeout: float,
    out: Path,
    adapter: str | None = None,
) -> tuple[list[str], Embedder, LLM]:
    """The systems' names (checked), the embedder, and the systems' model (with its
    LoRA adapter, if any), whose every call goes to OUT/llm_calls.jsonl."""
    from deltamem.bench.log import log_calls
    from deltamem.embed import make_embedder
    from deltamem.llm import make_llm

    names = system_names(systems)
    emb = make_embedder(embedder)
    model = make_llm(llm, timeout=timeout, adapter=adapter_or_global(adapter))
    log_calls(model, out)
    return names, emb, model


def judge_llm_for(
    judge: str,
    llm: str | None,
    model: LLM,
    timeout: float,
    out: Path,
    adapter: str | None = None,
) -> LLM | None:
    """The judge's LLM: None for --judge none, the systems' model when the specs match
    (unless the systems' model carries an adapter: the judge is the base model)."""
    from deltamem.bench.log import log_calls
    from deltamem.llm import make_llm

    if judge.strip().lower() == "none":
        return None
    if judge.strip() == (llm or "") and not adapter_or_global(adapter):
        return model
    judge_llm = make_llm(judge, timeout=timeout)
    log_calls(judge_llm, out)
    return judge_llm


# what the summary leaves to metrics.json: breakdowns and per-item lists
_SUMMARY_SKIPS = ("by_", "capacity", "qa_by_session")
# of a system's cost, the per-session figures (the totals grow with the run's size)
_SUMMARY_COST = ("llm_calls_per_session", "prompt_tokens_per_session")
SUMMARY_ROWS = 30  # one screen


def summary_rows(metrics: dict) -> tuple[list[str], list[tuple[str, list[object]]]]:
    """The systems (columns) and the headline figures (rows: name, one value per
    system) of a run's metrics: each system's numbers and those of its sections
    one level down (HaluMem's extraction, update, qa...), without breakdowns."""
    systems = [name for name, m in metrics.items() if isinstance(m, dict)]
    names: dict[str, None] = {}

    def leaves(m: dict, prefix: str = "", depth: int = 0) -> dict[str, object]:
        found: dict[str, object] = {}
        for key, value in m.items():
            name = f"{prefix}{key}"
            if key.startswith(_SUMMARY_SKIPS) or key == "benchmark":
                continue
            if prefix == "cost." and key not in _SUMMARY_COST:
                continue
            if isinstance(value, dict) and depth == 0:
                found.update(leaves(value, f"{name}.", 1))
            elif value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
                found[name] = value
        return found

    per_system = {s: leaves(metrics[s]) for s in systems}
    for s in systems:
        names.update(dict.fromkeys(per_system[s]))
    return systems, [(n, [per_system[s].get(n) for s in systems]) for n in names]


def print_summary(metrics: dict, out: Path) -> None:
    """A one-screen table of the headline figures on stdout; everything else (the
    breakdowns, the cost totals) is in the run directory's metrics.json."""
    from rich.table import Table

    systems, rows = summary_rows(metrics)
    benchmark = next((m.get("benchmark") for m in metrics.values() if isinstance(m, dict)), None)
    table = Table(title=f"{benchmark or 'bench'}: {out}", title_justify="left")
    table.add_column("metric")
    for s in systems:
        table.add_column(s, justify="right")
    for name, values in rows[:SUMMARY_ROWS]:
        cells = [
            "—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in values
        ]
        table.add_row(name, *cells)
    stdout = Console()
    stdout.print(table)
    more = f"{len(rows) - SUMMARY_ROWS} more figures and " if len(rows) > SUMMARY_ROWS else ""
    stdout.print(f"{more}the breakdowns: {out / 'metrics.json'}", markup=False, soft_wrap=True)
