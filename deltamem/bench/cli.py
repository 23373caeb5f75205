"""`deltamem bench ...`: run benchmarks against one or more memory systems.

    deltamem bench run TASK DATA... --systems deltamem,retrieval,pkg.mod:MySystem --out OUT
    deltamem bench halumem DATA.jsonl --systems deltamem,retrieval --out runs/h1
    deltamem bench locomo locomo10.json --systems deltamem --out runs/l1
    deltamem bench membench FirstAgentDataLowLevel.json --per-group 5 --out runs/mb1
    deltamem bench longmemeval longmemeval_s.json --instances 20 --out runs/lme1
    deltamem bench personamem questions_32k.csv shared_contexts_32k.jsonl --out runs/pm1

    deltamem bench judge runs/h1 --out runs/h1-judged --data DATA.jsonl
    deltamem bench rescore runs/h1 --out runs/h1-rescored
    deltamem bench report runs/h1
    deltamem bench compare runs/h1 runs/h2
    deltamem bench agreement --judge local --labels bench/labels

`bench run` is the one command (bench/task.py: a task is a dataset, the systems
and the scorers, run by one resumable loop); the per-benchmark commands are the
same run with the task named. Results are logged item by item to
OUT/results.jsonl (resumable with --resume); metrics land in OUT/metrics.json and
tables and charts in OUT/report.html.

The commands live beside this module: the benchmark runs in `cli_runs.py`, the
commands over a finished run and the judges in `cli_after_run.py`, what they
share in `cli_options.py`.
"""

from __future__ import annotations

import typer

from deltamem.bench.cli_after_run import (
    agreement,
    answer,
    compare,
    judge,
    report,
    rescore,
    tables,
)
from deltamem.bench.cli_rules import rules
from deltamem.bench.cli_runs import halumem, locomo, longmemeval, membench, personamem, run

app = typer.Typer(
    help="Run memory benchmarks (HaluMem, LoCoMo, MemBench, LongMemEval, PersonaMem) on memory "
    "systems.",
    no_args_is_help=True,
)

# registered in the order `deltamem bench --help` lists them
app.command("run")(run)
for command in (
    halumem,
    locomo,
    answer,
    judge,
    rescore,
    membench,
    longmemeval,
    personamem,
    report,
    tables,
    compare,
    agreement,
    rules,
):
    app.command()(command)
