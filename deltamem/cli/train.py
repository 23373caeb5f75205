"""`deltamem train …`: the training kit's commands (records; GRPO lives in the
train extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    no_args_is_help=True, help="Training kit: records, GRPO and export for the manager's model."
)
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


@app.command()
def grpo(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="The base model: a Hugging Face directory, or a .gguf file (transformers "
            "dequantises it; e.g. the embedded Qwen2.5-Coder GGUF).",
        ),
    ],
    records: Annotated[
        Path,
        typer.Option(
            "--records",
            exists=True,
            dir_okay=False,
            help="Training records JSONL (`deltamem train records` or `deltamem synth`).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("runs/grpo"),
    gguf_file: Annotated[
        str | None,
        typer.Option("--gguf-file", help="A GGUF file name inside the --model directory."),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Optimiser steps (one turn each).")] = 100,
    group: Annotated[int, typer.Option(min=2, help="Completions per prompt (GRPO group).")] = 8,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-6,
    beta: Annotated[float, typer.Option(min=0.0, help="KL coefficient.")] = 0.04,
    epsilon: Annotated[float, typer.Option(help="Clip epsilon.")] = 0.2,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    lora_r: Annotated[int, typer.Option("--lora-r", min=1, help="LoRA rank.")] = 8,
    lora_alpha: Annotated[int, typer.Option("--lora-alpha", min=1, help="LoRA alpha.")] = 16,
    max_prompt: Annotated[
        int, typer.Option("--max-prompt", help="Prompt tokens; longer turns are left out.")
    ] = 1024,
    max_completion: Annotated[
        int, typer.Option("--max-completion", help="Completion tokens (the extractor's cap).")
    ] = 240,
    resume: Annotated[
        str | None,
        typer.Option(help="Continue from a checkpoint directory, or 'last' (the newest in OUT)."),
    ] = None,
    save_steps: Annotated[int, typer.Option(min=1, help="Checkpoint every N steps.")] = 25,
    limit: Annotated[int | None, typer.Option(help="Use the first N turns only.")] = None,
    skip_empty: Annotated[
        bool, typer.Option(help="Leave out turns that state no fact (gold: no facts).")
    ] = False,
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="Less memory, slower backward (long prompts).")
    ] = False,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    split: Annotated[
        str,
        typer.Option(
            help="Records to train on: all, or train (leaves out the sessions "
            "`train eval --split heldout` scores)."
        ),
    ] = "all",
) -> None:
    """GRPO with LoRA on the manager's per-turn extraction prompts (the train extra).

    One example is one user turn of a record; the prompt is what the extractor sends;
    the reward is 0.1·format + 0.1·retrieval + 0.8·r_trans against the facts of that
    turn (deltamem/train/grpo.py). Writes OUT/adapter (PEFT), OUT/checkpoint-N,
    OUT/rewards.jsonl (one line per step) and OUT/base/config.json. Then
    `deltamem train export OUT --out adapter.gguf`."""
    from deltamem.cli.options import OPTS

    if split not in ("all", "train"):
        console.print(f"[red]error:[/red] --split is 'all' or 'train', not {split!r}")
        raise typer.Exit(2)
    try:
        from deltamem.train.grpo import GRPOSettings, train_grpo
    except ImportError as exc:  # pragma: no cover - depends on the install
        console.print(f"[red]error:[/red] {exc}: `pip install 'deltamem\\[train]'`")
        raise typer.Exit(2) from None
    settings = GRPOSettings(
        model=model,
        gguf_file=gguf_file,
        records=records,
        out=out,
        steps=steps,
        group=group,
        lr=lr,
        beta=beta,
        epsilon=epsilon,
        temperature=temperature,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        max_prompt=max_prompt,
        max_completion=max_completion,
        resume=resume,
        save_steps=save_steps,
        limit=limit,
        skip_empty=skip_empty,
        gradient_checkpointing=gradient_checkpointing,
        seed=seed,
        embedder=OPTS.embedder,
        split="train" if split == "train" else "all",
    )

    def show(line: dict[str, object]) -> None:
        def f(key: str) -> str:
            v = line.get(key)
            return f"{v:.3f}" if isinstance(v, float) else "-"

        console.print(
            f"step {line['step']}/{steps}  reward {f('reward')} (format {f('format')}, "
            f"retrieval {f('retrieval')}, r_trans {f('r_trans')})  kl {f('kl')}  "
            f"{line['seconds']}s"
        )

    try:
        result = train_grpo(settings, on_step=show)
    except ImportError as exc:
        console.print(
            f"[red]error:[/red] {exc}: install the train extra, `pip install 'deltamem\\[train]'`"
        )
        raise typer.Exit(2) from None
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    mean = sum(result.rewards) / len(result.rewards) if result.rewards else float("nan")
    console.print(
        f"[bold]{result.steps}[/bold] steps on {result.examples} turns "
        f"({result.dropped_long} too long, {result.unattributed} operations in no turn), "
        f"mean reward {mean:.3f}, {result.seconds:.0f}s → {result.adapter}"
    )


@app.command("eval")
def evaluate(
    records: Annotated[
        Path,
        typer.Option("--records", exists=True, dir_okay=False, help="Training records JSONL."),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="One JSON line per scored turn; a rerun resumes.")
    ] = Path("runs/train-eval.jsonl"),
    split: Annotated[
        str, typer.Option(help="Which records: heldout (default), train or all.")
    ] = "heldout",
    limit: Annotated[int | None, typer.Option(help="Score the first N turns only.")] = None,
    skip_empty: Annotated[
        bool, typer.Option(help="Leave out turns that state no fact (gold: no facts).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """The GRPO reward of the manager's extraction on held-back records, measured on
    the product's engine: `deltamem --adapter A.gguf train eval ...` against the same
    command without --adapter shows what training changed. Uses the global --llm
    (default: the embedded model) and --adapter."""
    from deltamem.cli.options import OPTS
    from deltamem.cli.render import emit_json, progress_bars
    from deltamem.embed import make_embedder
    from deltamem.llm.factory import make_llm
    from deltamem.train.evaluate import evaluate as run_eval

    if split not in ("heldout", "train", "all"):
        console.print(f"[red]error:[/red] --split is heldout, train or all, not {split!r}")
        raise typer.Exit(2)
    llm = make_llm(OPTS.llm_config)
    embedder = make_embedder(OPTS.embedder)
    seen = 0
    with progress_bars() as bars:

        def on_turn(n: int, total: int) -> None:
            nonlocal seen
            bars.total("turns", total)
            bars.advance("turns", n - seen)
            seen = n

        summary = run_eval(
            records,
            llm,
            out,
            embed=embedder.embed,
            split=split,  # type: ignore[arg-type]
            limit=limit,
            skip_empty=skip_empty,
            on_turn=on_turn,
        )
    if as_json:
        emit_json(summary.as_dict())
        return
    console.print(
        f"[bold]{summary.examples}[/bold] turns ({summary.failed} failed calls): mean reward "
        f"{summary.reward:.3f} (format {summary.format:.3f}, retrieval {summary.retrieval:.3f}, "
        f"r_trans {summary.r_trans:.3f}), {summary.seconds:.0f}s of model time → {out}"
    )


@app.command()
def export(
    adapter: Annotated[
        Path,
        typer.Argument(
            exists=True, help="A PEFT adapter directory, or the OUT of `deltamem train grpo`."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The GGUF LoRA to write.")] = Path(
        "adapter.gguf"
    ),
    base: Annotated[
        Path | None,
        typer.Option(
            "--base",
            help="The base model: its GGUF file (names and shapes are checked against it) "
            "or a Hugging Face directory with config.json. Default: what `train grpo` "
            "trained on.",
        ),
    ] = None,
    dtype: Annotated[str, typer.Option(help="f16 or f32.")] = "f16",
) -> None:
    """A trained LoRA adapter as a GGUF LoRA for llama.cpp: then
    `deltamem --adapter OUT.gguf ...` or `Memory(llm="local", adapter=...)`."""
    from deltamem.train.export import ExportError, export_lora, resolve_adapter

    try:
        adapter_dir, base_path = resolve_adapter(adapter, base)
        report = export_lora(adapter_dir, base_path, out, dtype=dtype)
    except (ExportError, ImportError, OSError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    console.print(
        f"{report.tensors} LoRA tensor pairs ({report.arch}, r={report.rank}, "
        f"alpha={report.alpha:g}, {report.dtype}) → {report.out}"
    )
