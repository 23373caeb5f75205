"""`deltamem bench` commands over a finished run or the judges: answer a run's
questions again or judge its answers again, rebuild its report, print its tables,
compare two systems' answers question by question, and measure a judge's agreement
with hand labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from deltamem.bench.cli_options import (
    EmbOpt,
    FinishedRunArg,
    JudgeDataOpt,
    JudgeModeOpt,
    JudgeOpt,
    LLMOpt,
    OutOpt,
    TimeoutOpt,
    console,
    judge_kinds,
    judge_llm_for,
    own_run_dir,
    print_summary,
)
from deltamem.bench.progress import Progress
from deltamem.cli.render import progress_bars
from deltamem.llm.base import LLM


def answer(
    run: FinishedRunArg,
    out: OutOpt,
    k: Annotated[
        int | None, typer.Option("--k", help="Answer from the first k logged hits (default all).")
    ] = None,
    systems: Annotated[
        str | None, typer.Option("--systems", help="Only these systems' questions.")
    ] = None,
    order: Annotated[
        str,
        typer.Option(help="List the hits by date (oldest first), newest first, or by relevance."),
    ] = "date",
    categories: Annotated[
        str | None,
        typer.Option(
            "--categories",
            help="LoCoMo: answer only these categories (e.g. 1,2,3,4: the headline's);"
            " the others are copied unanswered.",
        ),
    ] = None,
    llm: LLMOpt = None,
    judge: JudgeOpt = "none",
    data: JudgeDataOpt = None,
    judge_mode: JudgeModeOpt = "auto",
    resume: Annotated[bool, typer.Option(help="Skip questions already in OUT.")] = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """Answer a run's questions again from its log (each question's hits are kept),
    with this --llm and --k, into OUT; the questions are then judged with --judge
    (for HaluMem QA only: the other verdicts are carried over)."""
    from deltamem.answer import ORDERS
    from deltamem.bench.log import log_calls
    from deltamem.bench.reanswer import ReanswerRun, reanswer
    from deltamem.llm import make_llm

    if order not in ORDERS:
        raise typer.BadParameter(f"--order is one of {', '.join(ORDERS)}")
    model = make_llm(llm, timeout=timeout)
    with own_run_dir(out), progress_bars() as bars:
        log_calls(model, out)
        job = ReanswerRun(
            source=run,
            out=out,
            k=k,
            systems=tuple(n.strip() for n in (systems or "").split(",") if n.strip()),
            resume=resume,
            order=order,
            categories=tuple(int(c) for c in (categories or "").split(",") if c.strip()),
        )
        n = reanswer(job, model, progress=bars)
        console.print(f"[bold]{n}[/bold] questions answered → {out}")
        judge_llm = judge_llm_for(judge, llm, model, timeout, out)
        metrics = _judge_questions(out, judge_llm, judge_mode, data, bars)
    print_summary(metrics, out)


def _judge_questions(
    out: Path,
    judge_llm: LLM | None,
    judge_mode: str,
    data: Path | None,
    bars: Progress,
) -> dict[str, Any]:
    """Judge the questions of OUT that have no verdict yet (none without a judge) and
    write its metrics."""
    from deltamem.bench.log import RESULTS, read_records
    from deltamem.bench.paired import benchmark_of

    if benchmark_of(list(read_records(out / RESULTS))) == "locomo":
        from deltamem.bench.locomo import judge_answers
        from deltamem.bench.locomo import write_metrics as locomo_metrics

        if judge_llm is not None:
            judge_answers(out, judge_llm, judge_mode, progress=bars)
        return locomo_metrics(out)
    from deltamem.bench.halumem import write_metrics

    if judge_llm is not None:
        from deltamem.bench.judges.halumem import judge_run

        if data is None:
            raise typer.BadParameter("--judge needs --data (the HaluMem file)")
        judge_run(out, data, judge_llm, progress=bars, kinds=judge_kinds("qa"), mode=judge_mode)
    return write_metrics(out)


def judge(
    run: FinishedRunArg,
    out: OutOpt,
    judge: Annotated[str, typer.Option(help="The judge's LLM (e.g. local).")] = "local",
    data: JudgeDataOpt = None,
    judge_mode: JudgeModeOpt = "auto",
    timeout: TimeoutOpt = 900.0,
) -> None:
    """Judge a run's answers again with today's judges, into OUT (a new directory): the
    answers and the other verdicts are copied, the judge cache too, so only checks
    not asked before cost a model call."""
    from deltamem.bench.log import RESULTS, log_calls, read_records
    from deltamem.bench.paired import benchmark_of
    from deltamem.bench.rejudge import copy_unjudged
    from deltamem.llm import make_llm

    if judge.strip().lower() == "none":
        raise typer.BadParameter("--judge names the judge's LLM")
    questions = [r for r in read_records(run / RESULTS) if r.get("kind") == "question"]
    if not questions:
        raise typer.BadParameter(f"{run / RESULTS} holds no question: not a finished run")
    if data is None and benchmark_of(questions) == "halumem":
        raise typer.BadParameter("a HaluMem run is judged with --data (its HaluMem file)")
    try:
        n = copy_unjudged(run, out)
    except FileExistsError as exc:
        raise typer.BadParameter(str(exc)) from exc
    with own_run_dir(out), progress_bars() as bars:
        judge_llm = make_llm(judge, timeout=timeout)
        log_calls(judge_llm, out)
        console.print(f"[bold]{n}[/bold] questions to judge → {out}")
        metrics = _judge_questions(out, judge_llm, judge_mode, data, bars)
    print_summary(metrics, out)


def rescore(
    run: FinishedRunArg,
    out: OutOpt,
    tau: Annotated[
        float | None,
        typer.Option(
            help="Cosine a predicted and a gold memory need to be paired (default the"
            " distance's own, 0.75)."
        ),
    ] = None,
    embedder: EmbOpt = None,
) -> None:
    """Compute a HaluMem run's memory-state distance again (today's `state_distance`,
    from the memories and gold points each session logged), into OUT (a new
    directory): no model is called; the judges' verdicts are carried over."""
    from deltamem.bench.halumem import write_metrics
    from deltamem.bench.rescore import rescore_states
    from deltamem.embed import make_embedder
    from deltamem.train.distance import DEFAULT_TAU

    try:
        scored, moved = rescore_states(
            run, out, make_embedder(embedder), DEFAULT_TAU if tau is None else tau
        )
    except (FileExistsError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    console.print(f"[bold]{scored}[/bold] sessions scored again, {moved} moved → {out}")
    print_summary(write_metrics(out), out)


def report(
    out: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A run's output dir.")],
) -> None:
    """Rebuild OUT/report.html from OUT/metrics.json and OUT/results.jsonl."""
    from deltamem.bench.report import METRICS, write_report

    if not (out / METRICS).exists():
        raise typer.BadParameter(f"{out / METRICS} does not exist: run a benchmark first")
    path = write_report(out)
    console.print(f"[bold]report[/bold] → {path}")


def tables(
    out: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A run's output dir.")],
) -> None:
    """Print a run's metrics (and LLM usage) as Markdown tables."""
    from deltamem.bench.markdown import run_tables

    if not (out / "metrics.json").exists():
        raise typer.BadParameter(f"{out / 'metrics.json'} does not exist: run a benchmark first")
    typer.echo(run_tables(out))


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            file_okay=False,
            help="A run of system A, then one of B; more A B pairs (another user) are pooled.",
        ),
    ],
    systems: Annotated[
        str | None,
        typer.Option(
            "--systems",
            help="A,B: the system to read in each run (needed where a run holds several).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, not Markdown.")] = False,
) -> None:
    """Compare two systems on the questions both answered: each figure's difference
    with a paired bootstrap interval, and McNemar's exact test for right/wrong.
    Runs come in A B pairs; several pairs (two users) are pooled."""
    import json

    from deltamem.bench.paired import CompareError, compare_runs, markdown

    names: list[str | None] = [None, None]
    if systems:
        parts = [s.strip() for s in systems.split(",")]
        if len(parts) != 2 or not all(parts):
            raise typer.BadParameter("--systems takes two names: A,B")
        names = list(parts)
    if len(runs) % 2:
        raise typer.BadParameter("give the runs in pairs: A B [A B ...]")
    try:
        result = compare_runs(runs[0::2], runs[1::2], names[0], names[1])
    except CompareError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(json.dumps(result, indent=2) if as_json else markdown(result))


def agreement(
    judge: Annotated[str, typer.Option("--judge", help="LLM spec of the judge to measure.")],
    labels: Annotated[
        Path, typer.Option("--labels", exists=True, file_okay=False, help="Labels directory.")
    ] = Path("bench/labels"),
    data: Annotated[
        Path, typer.Option("--data", help="HaluMem dev data the accuracy labels point into.")
    ] = Path("../shared/data/halumem"),
    out: Annotated[
        Path, typer.Option("--out", help="Where answers and the verdict cache go.")
    ] = Path("runs/agreement"),
    judges: Annotated[
        str, typer.Option("--judges", help="Comma-separated subset of the judges.")
    ] = "integrity,accuracy,update,qa,locomo",
    judge_mode: JudgeModeOpt = "auto",
    split: Annotated[
        str, typer.Option("--split", help="Labels half: test (report), tune, or all.")
    ] = "test",
    timeout: TimeoutOpt = 900.0,
) -> None:
    """The judge's agreement with hand labels: n, accuracy, Cohen's kappa, confusion."""
    from rich.table import Table

    from deltamem.bench.agreement import JUDGES, LabelError, run_agreement
    from deltamem.llm import make_llm

    names = [j.strip() for j in judges.split(",") if j.strip()]
    unknown = [j for j in names if j not in JUDGES]
    if unknown or not names:
        raise typer.BadParameter(f"unknown judge(s) {unknown}; choose from {', '.join(JUDGES)}")
    model = make_llm(judge, timeout=timeout)
    try:
        with own_run_dir(out), progress_bars() as bars:
            report = run_agreement(
                labels,
                model,
                data=data,
                out=out,
                judges=names,
                mode=judge_mode,
                split=split,
                progress=bars,
            )
    except (LabelError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    meta = report["_meta"]
    table = Table(title=f"judge agreement ({model.name}, {meta['mode']}, {meta['split']} half)")
    for col in ("judge", "n", "accuracy", "kappa", "skipped"):
        table.add_column(col)
    for name in names:
        r = report.get(name)
        if r is None:
            continue
        rows = [(name, r)] + ([("accuracy.included", r["included"])] if "included" in r else [])
        for label, s in rows:
            table.add_row(
                label,
                str(s["n"]),
                "–" if s["accuracy"] is None else f"{s['accuracy']:.3f}",
                "–" if s["kappa"] is None else f"{s['kappa']:.3f}",
                str(r.get("skipped", 0) if label == name else ""),
            )
    console.print(table)
    for name in names:
        r = report.get(name)
        if r is None:
            continue
        console.print(f"[bold]{name}[/bold] confusion (rows: human, columns: judge)")
        cm = Table()
        cm.add_column("human \\ judge")
        for c in r["classes"]:
            cm.add_column(str(c))
        for c, row in zip(r["classes"], r["confusion"], strict=True):
            cm.add_row(str(c), *map(str, row))
        console.print(cm)
    console.print(f"[bold]agreement[/bold] → {out / 'agreement.json'}")
