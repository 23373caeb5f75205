"""`deltamem bench ...`: run benchmarks against one or more memory systems.

    deltamem bench halumem DATA.jsonl --systems deltamem,retrieval --out runs/h1
    deltamem bench locomo locomo10.json --systems deltamem --out runs/l1
    deltamem bench membench FirstAgentDataLowLevel.json --per-group 5 --out runs/mb1
    deltamem bench longmemeval longmemeval_s.json --instances 20 --out runs/lme1
    deltamem bench personamem questions_32k.csv shared_contexts_32k.jsonl --out runs/pm1

    deltamem bench report runs/h1
    deltamem bench agreement --judge local --labels bench/labels

Results are logged item by item to OUT/results.jsonl (resumable with --resume);
metrics land in OUT/metrics.json and tables and charts in OUT/report.html.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from deltamem.cli.render import progress_bars

if TYPE_CHECKING:
    from deltamem.embed import Embedder
    from deltamem.llm.base import LLM

app = typer.Typer(
    help="Run memory benchmarks (HaluMem, LoCoMo, MemBench, LongMemEval, PersonaMem) on memory "
    "systems.",
    no_args_is_help=True,
)
console = Console(stderr=True)

SystemsOpt = Annotated[str, typer.Option("--systems", help="Comma-separated system names.")]
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
EmbOpt = Annotated[str | None, typer.Option("--embedder", help="Embedder spec.")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout", help="Seconds one LLM call may take (a long session on a small CPU)."
    ),
]


def _judges(spec: str) -> frozenset[str]:
    from deltamem.bench.judges.halumem import JUDGES

    names = frozenset(n.strip() for n in spec.split(",") if n.strip())
    if not names or names - JUDGES:
        raise typer.BadParameter(
            f"unknown judge in {spec!r}; choose from {', '.join(sorted(JUDGES))}",
            param_hint="--judges",
        )
    return names


def _systems(spec: str) -> list[str]:
    from deltamem.bench.systems import SYSTEMS

    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if not names or unknown:
        raise typer.BadParameter(
            f"unknown system(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(SYSTEMS)}"
        )
    return names


@contextmanager
def _own(out: Path) -> Iterator[None]:
    """This process alone writes to OUT while the command runs."""
    from deltamem.bench.log import RunDirBusy, exclusive_run

    try:
        with exclusive_run(out):
            yield
    except RunDirBusy as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def _adapter(adapter: str | None) -> str | None:
    from deltamem.cli.options import OPTS

    return adapter or OPTS.adapter


def _setup(
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

    names = _systems(systems)
    emb = make_embedder(embedder)
    model = make_llm(llm, timeout=timeout, adapter=_adapter(adapter))
    log_calls(model, out)
    return names, emb, model


def _judge_llm(
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
    if judge.strip() == (llm or "") and not _adapter(adapter):
        return model
    judge_llm = make_llm(judge, timeout=timeout)
    log_calls(judge_llm, out)
    return judge_llm


def _summary(metrics: dict, out: Path) -> None:
    console.print(f"[bold]metrics[/bold] → {out / 'metrics.json'}")
    console.print_json(json.dumps(metrics, default=str)[:20000])


@app.command()
def halumem(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="HaluMem JSONL")],
    systems: SystemsOpt = "deltamem",
    out: OutOpt = Path("bench-out/halumem"),
    users: Annotated[int | None, typer.Option(help="Evaluate the first N users.")] = None,
    sessions: Annotated[int | None, typer.Option(help="First N sessions per user.")] = None,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    judge: JudgeOpt = "none",
    embedder: EmbOpt = None,
    resume: Annotated[bool, typer.Option(help="Skip items already in results.jsonl.")] = False,
    timeout: TimeoutOpt = 900.0,
    answers: Annotated[
        bool,
        typer.Option(
            help="Answer the questions. --no-answers: retrieval and evidence recall only, "
            "no answer calls (with --judge none, the fast judge-free loop)."
        ),
    ] = True,
    judges: Annotated[
        str,
        typer.Option(
            help="Which judges run, comma-separated: integrity, accuracy, update, qa "
            "(default all; a later --resume run can add the others)."
        ),
    ] = "integrity,accuracy,update,qa",
    judge_mode: JudgeModeOpt = "auto",
) -> None:
    """HaluMem: extraction, updating and QA, item by item (SPEC §4.1)."""
    from deltamem.bench.halumem import HaluMemRun, run_halumem, write_metrics

    names, emb, model = _setup(systems, embedder, llm, timeout, out, adapter)
    with _own(out), progress_bars() as advance:
        run = HaluMemRun(
            data=data,
            out=out,
            systems=names,
            users=users,
            sessions=sessions,
            resume=resume,
            answer=answers,
            progress=advance,
        )
        metrics = run_halumem(run, llm=model, embedder=emb)
        judge_llm = _judge_llm(judge, llm, model, timeout, out, adapter)
        if judge_llm is not None:
            from deltamem.bench.judges.halumem import judge_run

            judge_run(
                out, data, judge_llm, progress=advance, kinds=_judges(judges), mode=judge_mode
            )
            metrics = write_metrics(out)
    _summary(metrics, out)


@app.command()
def locomo(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="locomo10.json")],
    systems: SystemsOpt = "deltamem",
    out: OutOpt = Path("bench-out/locomo"),
    conversations: Annotated[int | None, typer.Option(help="First N conversations.")] = None,
    conversation: Annotated[
        list[str] | None,
        typer.Option("--conversation", help="Only this sample id (repeatable), e.g. conv-30."),
    ] = None,
    sessions: Annotated[int | None, typer.Option(help="First N sessions each.")] = None,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    judge: JudgeOpt = "none",
    embedder: EmbOpt = None,
    resume: Annotated[bool, typer.Option(help="Skip items already in results.jsonl.")] = False,
    both_as_user: Annotated[
        bool, typer.Option(help="Give both speakers role 'user' (default: B is 'assistant').")
    ] = False,
    judge_mode: JudgeModeOpt = "auto",
    timeout: TimeoutOpt = 900.0,
) -> None:
    """LoCoMo: token F1, BLEU-1, evidence recall (and an LLM judge when given)."""
    from deltamem.bench.locomo import LocomoRun, run_locomo

    names, emb, model = _setup(systems, embedder, llm, timeout, out, adapter)
    judge_llm = _judge_llm(judge, llm, model, timeout, out, adapter)
    with _own(out), progress_bars() as advance:
        run = LocomoRun(
            data=data,
            out=out,
            systems=names,
            conversations=conversations,
            only=tuple(conversation or ()),
            sessions=sessions,
            resume=resume,
            both_as_user=both_as_user,
            judge_mode=judge_mode,
            progress=advance,
        )
        metrics = run_locomo(run, llm=model, embedder=emb, judge=judge_llm)
    _summary(metrics, out)


@app.command()
def answer(
    run: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="A finished run directory.")
    ],
    out: OutOpt,
    k: Annotated[
        int | None, typer.Option("--k", help="Answer from the first k logged hits (default all).")
    ] = None,
    systems: Annotated[
        str | None, typer.Option("--systems", help="Only these systems' questions.")
    ] = None,
    order: Annotated[
        str, typer.Option(help="List the hits by date (oldest first) or by relevance.")
    ] = "date",
    llm: LLMOpt = None,
    judge: JudgeOpt = "none",
    data: Annotated[
        Path | None,
        typer.Option("--data", exists=True, dir_okay=False, help="HaluMem JSONL (for the judges)."),
    ] = None,
    judge_mode: JudgeModeOpt = "auto",
    resume: Annotated[bool, typer.Option(help="Skip questions already in OUT.")] = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """Answer a run's questions again from its log (each question's hits are kept),
    with this --llm and --k, into OUT; HaluMem questions are then judged with
    --judge (QA only: the other verdicts are carried over)."""
    from deltamem.bench.log import RESULTS, log_calls, read_records
    from deltamem.bench.reanswer import ReanswerRun, reanswer
    from deltamem.llm import make_llm

    if order not in ("date", "relevance"):
        raise typer.BadParameter("--order is date or relevance")
    model = make_llm(llm, timeout=timeout)
    with _own(out), progress_bars() as advance:
        log_calls(model, out)
        job = ReanswerRun(
            source=run,
            out=out,
            k=k,
            systems=tuple(n.strip() for n in (systems or "").split(",") if n.strip()),
            resume=resume,
            order="relevance" if order == "relevance" else "date",
        )
        n = reanswer(job, model, progress=advance)
        console.print(f"[bold]{n}[/bold] questions answered → {out}")
        records = list(read_records(out / RESULTS))
        if any("category" in r for r in records if r.get("kind") == "question"):
            from deltamem.bench.locomo import write_metrics as locomo_metrics

            metrics = locomo_metrics(out)
        else:
            from deltamem.bench.halumem import write_metrics

            judge_llm = _judge_llm(judge, llm, model, timeout, out)
            if judge_llm is not None:
                from deltamem.bench.judges.halumem import judge_run

                if data is None:
                    raise typer.BadParameter("--judge needs --data (the HaluMem file)")
                judge_run(
                    out, data, judge_llm, progress=advance, kinds=_judges("qa"), mode=judge_mode
                )
            metrics = write_metrics(out)
    _summary(metrics, out)


ResumeOpt = Annotated[bool, typer.Option(help="Skip items already in results.jsonl.")]
KOpt = Annotated[int, typer.Option("--k", help="Items retrieved per question.")]


@app.command()
def membench(
    data: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="A MemBench file, e.g. FirstAgentDataLowLevel.json"
        ),
    ],
    systems: SystemsOpt = "deltamem",
    out: OutOpt = Path("bench-out/membench"),
    trajectories: Annotated[int | None, typer.Option(help="The first N trajectories.")] = None,
    per_group: Annotated[
        int | None, typer.Option(help="The first N trajectories of each question type × group.")
    ] = None,
    noise: Annotated[
        int,
        typer.Option(
            help="Insert N noise steps from other trajectories before each question "
            "(capacity: runs with several values can share --out with --resume)."
        ),
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the noise draw.")] = 0,
    k: KOpt = 10,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    embedder: EmbOpt = None,
    resume: ResumeOpt = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """MemBench: multiple-choice accuracy, recall@k of target steps, capacity.

    Accuracy by scenario (participation / observation) and level (factual /
    reflective), recall@k of target_step_id, accuracy per history length (--noise),
    read and write time per step."""
    from deltamem.bench.membench import MemBenchRun, run_membench

    names, emb, model = _setup(systems, embedder, llm, timeout, out, adapter)
    with _own(out), progress_bars() as advance:
        run = MemBenchRun(
            data=data,
            out=out,
            systems=names,
            trajectories=trajectories,
            per_group=per_group,
            noise=noise,
            seed=seed,
            resume=resume,
            qa_k=k,
            progress=advance,
        )
        metrics = run_membench(run, llm=model, embedder=emb)
    _summary(metrics, out)


@app.command()
def longmemeval(
    data: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="longmemeval_oracle.json, _s.json or _m.json"
        ),
    ],
    systems: SystemsOpt = "deltamem",
    out: OutOpt = Path("bench-out/longmemeval"),
    instances: Annotated[int | None, typer.Option(help="The first N instances.")] = None,
    question: Annotated[
        list[str] | None, typer.Option("--question", help="Only this question id (repeatable).")
    ] = None,
    k: KOpt = 20,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    judge: JudgeOpt = "none",
    judge_mode: JudgeModeOpt = "auto",
    embedder: EmbOpt = None,
    resume: ResumeOpt = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """LongMemEval: accuracy by question type, token F1, evidence recall.

    Accuracy by question type and on abstention questions with --judge; token F1
    always; session- and turn-level recall of the evidence."""
    from deltamem.bench.longmemeval import LongMemEvalRun, run_longmemeval

    names, emb, model = _setup(systems, embedder, llm, timeout, out, adapter)
    judge_llm = _judge_llm(judge, llm, model, timeout, out, adapter)
    with _own(out), progress_bars() as advance:
        run = LongMemEvalRun(
            data=data,
            out=out,
            systems=names,
            instances=instances,
            only=tuple(question or ()),
            resume=resume,
            qa_k=k,
            judge_mode=judge_mode,
            progress=advance,
        )
        try:
            metrics = run_longmemeval(run, llm=model, embedder=emb, judge=judge_llm)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    _summary(metrics, out)


@app.command()
def personamem(
    questions: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="questions_32k.csv (or 128k, 1M)")
    ],
    contexts: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, help="shared_contexts_32k.jsonl (same size)"),
    ],
    systems: SystemsOpt = "deltamem",
    out: OutOpt = Path("bench-out/personamem"),
    shared_contexts: Annotated[
        int | None, typer.Option(help="The first N shared contexts (all their questions).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="The first N questions of the CSV.")] = None,
    chunk: Annotated[int, typer.Option(help="Most context messages in one session.")] = 20,
    k: KOpt = 10,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    embedder: EmbOpt = None,
    resume: ResumeOpt = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """PersonaMem: multiple-choice accuracy by question type.

    Each shared context is ingested once and its questions asked where the context
    reaches their end index."""
    from deltamem.bench.personamem import PersonaMemRun, run_personamem

    names, emb, model = _setup(systems, embedder, llm, timeout, out, adapter)
    with _own(out), progress_bars() as advance:
        run = PersonaMemRun(
            questions=questions,
            contexts=contexts,
            out=out,
            systems=names,
            shared_contexts=shared_contexts,
            limit=limit,
            resume=resume,
            qa_k=k,
            chunk=chunk,
            progress=advance,
        )
        try:
            metrics = run_personamem(run, llm=model, embedder=emb)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    _summary(metrics, out)


@app.command()
def report(
    out: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A run's output dir.")],
) -> None:
    """Rebuild OUT/report.html from OUT/metrics.json and OUT/results.jsonl."""
    from deltamem.bench.report import METRICS, write_report

    if not (out / METRICS).exists():
        raise typer.BadParameter(f"{out / METRICS} does not exist: run a benchmark first")
    path = write_report(out)
    console.print(f"[bold]report[/bold] → {path}")


@app.command()
def tables(
    out: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A run's output dir.")],
) -> None:
    """Print a run's metrics (and LLM usage) as Markdown tables."""
    from deltamem.bench.markdown import run_tables

    if not (out / "metrics.json").exists():
        raise typer.BadParameter(f"{out / 'metrics.json'} does not exist: run a benchmark first")
    typer.echo(run_tables(out))


@app.command()
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
        with _own(out), progress_bars() as advance:
            report = run_agreement(
                labels,
                model,
                data=data,
                out=out,
                judges=names,
                mode=judge_mode,
                split=split,
                progress=advance,
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
