"""`deltamem bench run TASK DATA...`: run a benchmark on memory systems, item by item
into OUT, and the short commands (`deltamem bench halumem`, `locomo`, `membench`,
`longmemeval`, `personamem`) that are the same run with the task named: all of
them go through `run_task`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from deltamem.bench.cli_options import (
    AdapterOpt,
    EmbOpt,
    JudgeModeOpt,
    JudgeOpt,
    KOpt,
    LLMOpt,
    OutOpt,
    ResumeOpt,
    SystemsOpt,
    TimeoutOpt,
    console,
    judge_llm_for,
    own_run_dir,
    print_summary,
    systems_setup,
)
from deltamem.cli.render import progress_bars


def run_task(
    name: str,
    data: list[Path],
    *,
    systems: str,
    out: Path,
    llm: str | None,
    adapter: str | None,
    judge: str,
    judge_mode: str,
    embedder: str | None,
    timeout: float,
    resume: bool,
    limit: int | None = None,
    only: list[str] | None = None,
    k: int | None = None,
    answers: bool = True,
    options: dict[str, Any] | None = None,
) -> None:
    """Run the task `name` on DATA for the systems, into OUT: the one code path of
    `bench run` and of the short commands."""
    from deltamem.bench.task import Models, RunSpec, TaskError, get_task

    try:
        task = get_task(name)
        spec = RunSpec(
            data=data,
            out=out,
            systems=[],  # checked below, with the models
            limit=limit,
            only=tuple(only or ()),
            k=k,
            resume=resume,
            answer=answers,
            judge_mode=judge_mode,
            options=dict(options or {}),
        )
        task.check(spec)  # before the models load: a wrong option fails at once
    except TaskError as exc:
        raise typer.BadParameter(str(exc)) from exc
    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    spec.systems = names
    judge_llm = judge_llm_for(judge, llm, model, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as bars:
        spec.progress = bars
        try:
            metrics = task.run(spec, Models(llm=model, embedder=emb, judge=judge_llm))
        except ValueError as exc:  # TaskError too: an option or id the data lacks
            raise typer.BadParameter(str(exc)) from exc
    print_summary(metrics, out)


def run(
    task: Annotated[
        str,
        typer.Argument(
            help="halumem, locomo, membench, longmemeval, personamem, or package.module:TASK"
        ),
    ],
    data: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="The task's data file(s): one, or for personamem the questions CSV then "
            "the shared contexts JSONL.",
        ),
    ],
    systems: SystemsOpt = "deltamem",
    out: Annotated[
        Path | None, typer.Option("--out", help="Output directory (default bench-out/TASK).")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            help="The first N units: users (halumem), conversations (locomo), trajectories "
            "(membench), instances (longmemeval), shared contexts (personamem)."
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Only this conversation (locomo) or question id (longmemeval); repeatable.",
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option("--k", help="Items retrieved per question (default: the task's)."),
    ] = None,
    llm: LLMOpt = None,
    adapter: AdapterOpt = None,
    judge: JudgeOpt = "none",
    judge_mode: JudgeModeOpt = "auto",
    embedder: EmbOpt = None,
    resume: ResumeOpt = False,
    timeout: TimeoutOpt = 900.0,
    answers: Annotated[
        bool,
        typer.Option(
            help="Answer the questions. --no-answers (halumem, locomo): retrieval and "
            "answer-free metrics only."
        ),
    ] = True,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A task's own option, NAME=VALUE (repeatable), e.g. sessions=12, "
            "both_as_user=yes, noise=100, chunk=20; --check lists them.",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            help="Load the data, say how many units the run would evaluate and the task's "
            "options, and run nothing."
        ),
    ] = False,
) -> None:
    """Run a benchmark task on memory systems: its dataset, the systems, its scorers and
    judges, item by item into OUT (resumable with --resume). The short commands
    (`bench halumem`, `bench locomo`, ...) are this command with the task named."""
    from deltamem.bench.task import RunSpec, TaskError, get_task, parse_options

    out = out or Path("bench-out") / task.replace(":", "_").replace("/", "_")
    try:
        the_task = get_task(task)
        options = parse_options(the_task, option or [])
        if check:
            spec = RunSpec(
                data=data,
                out=out,
                systems=[],
                limit=limit,
                only=tuple(only or ()),
                k=k,
                answer=answers,
                judge_mode=judge_mode,
                options=options,
            )
            units = the_task.dataset(spec)
            console.print(f"[bold]{the_task.title}[/bold]: {len(units)} units to evaluate")
            for name, default in the_task.options().items():
                console.print(f"  --set {name}={options.get(name, default)}")
            return
    except (TaskError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    run_task(
        task,
        data,
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge=judge,
        judge_mode=judge_mode,
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=limit,
        only=only,
        k=k,
        answers=answers,
        options=options,
    )


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
    """HaluMem: memory extraction, memory updating and question answering, item by item."""
    run_task(
        "halumem",
        [data],
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge=judge,
        judge_mode=judge_mode,
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=users,
        answers=answers,
        options={"sessions": sessions, "judges": judges},
    )


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
    answers: Annotated[
        bool,
        typer.Option(
            help="Answer the questions. --no-answers: retrieval and evidence recall only "
            "(the write pass; `deltamem bench answer` answers the logged hits later)."
        ),
    ] = True,
) -> None:
    """LoCoMo: token F1, BLEU-1, evidence recall (and an LLM judge when given)."""
    run_task(
        "locomo",
        [data],
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge=judge,
        judge_mode=judge_mode,
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=conversations,
        only=conversation,
        answers=answers,
        options={"sessions": sessions, "both_as_user": both_as_user},
    )


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
    run_task(
        "membench",
        [data],
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge="none",
        judge_mode="auto",
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=trajectories,
        k=k,
        options={"per_group": per_group, "noise": noise, "seed": seed},
    )


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
    run_task(
        "longmemeval",
        [data],
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge=judge,
        judge_mode=judge_mode,
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=instances,
        only=question,
        k=k,
    )


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
    run_task(
        "personamem",
        [questions, contexts],
        systems=systems,
        out=out,
        llm=llm,
        adapter=adapter,
        judge="none",
        judge_mode="auto",
        embedder=embedder,
        timeout=timeout,
        resume=resume,
        limit=shared_contexts,
        k=k,
        options={"limit": limit, "chunk": chunk},
    )
