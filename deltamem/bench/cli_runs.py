"""`deltamem bench <benchmark>`: the commands that run a benchmark on memory systems
(HaluMem, LoCoMo, MemBench, LongMemEval, PersonaMem), item by item into OUT."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
    judge_kinds,
    judge_llm_for,
    own_run_dir,
    print_summary,
    systems_setup,
)
from deltamem.cli.render import progress_bars


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
    from deltamem.bench.halumem import HaluMemRun, run_halumem, write_metrics

    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as advance:
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
        judge_llm = judge_llm_for(judge, llm, model, timeout, out, adapter)
        if judge_llm is not None:
            from deltamem.bench.judges.halumem import judge_run

            judge_run(
                out, data, judge_llm, progress=advance, kinds=judge_kinds(judges), mode=judge_mode
            )
            metrics = write_metrics(out)
    print_summary(metrics, out)


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
    from deltamem.bench.locomo import LocomoRun, run_locomo

    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    judge_llm = judge_llm_for(judge, llm, model, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as advance:
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
            answer=answers,
            progress=advance,
        )
        metrics = run_locomo(run, llm=model, embedder=emb, judge=judge_llm)
    print_summary(metrics, out)


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

    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as advance:
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
    print_summary(metrics, out)


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

    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    judge_llm = judge_llm_for(judge, llm, model, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as advance:
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
    print_summary(metrics, out)


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

    names, emb, model = systems_setup(systems, embedder, llm, timeout, out, adapter)
    with own_run_dir(out), progress_bars() as advance:
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
    print_summary(metrics, out)
