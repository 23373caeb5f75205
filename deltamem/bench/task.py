"""One task shape for every benchmark: a dataset (a loader of items), the systems
under test, scorers (judge-free metrics and judges), run by one resumable loop
that logs every item to OUT/results.jsonl, then metrics and one page of tables.

    deltamem bench run TASK DATA... [--systems a,b,pkg.mod:Class] [--out DIR] ...

`TASKS` is the one registry: a name and where its `Task` object lives. The five
published benchmarks wrap their runners (`RunnerTask`: the runner's own run
dataclass is filled from the `RunSpec` every task gets); a new benchmark of
sessions-then-questions subclasses `qa_task.QATask` and writes only its dataset
loader (`units`) and its scorer (`score`), then adds its line here (or is named
as `package.module:OBJECT` without touching this file). docs/bench.md shows how.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from deltamem.bench.progress import Progress

if TYPE_CHECKING:
    from deltamem.bench.render import Block
    from deltamem.bench.systems.base import MemorySystem
    from deltamem.embed import Embedder
    from deltamem.llm.base import LLM

Record = dict[str, Any]

# name -> "module:object" of its Task (imported when the task is used)
TASKS: dict[str, str] = {
    "halumem": "deltamem.bench.halumem:TASK",
    "locomo": "deltamem.bench.locomo:TASK",
    "membench": "deltamem.bench.membench:TASK",
    "longmemeval": "deltamem.bench.longmemeval:TASK",
    "personamem": "deltamem.bench.personamem:TASK",
}


class TaskError(ValueError):
    """A task or a task's option that cannot be used as given."""


@dataclass
class RunSpec:
    """What every benchmark run is given, whatever the benchmark."""

    data: Sequence[Path]  # the task's data files, in the order its `data` names them
    out: Path
    systems: Sequence[str]
    limit: int | None = None  # the first N units: users, conversations, trajectories, ...
    only: Sequence[str] = ()  # these units or questions only (by the dataset's ids)
    k: int | None = None  # items retrieved per question (None: the task's default)
    resume: bool = False  # skip what OUT/results.jsonl holds
    answer: bool = True  # False: retrieval and answer-free metrics only, no answer call
    judge_mode: str = "auto"  # rubric, decomposed or auto (judges.sets.make_judges)
    options: Mapping[str, Any] = field(default_factory=dict)  # the task's own (`options()`)
    progress: Progress | None = None


Make = Callable[[str, Path], "MemorySystem"]


@dataclass
class Models:
    """The models a run uses. `make(name, workdir)` builds a system (default: the
    registry of `deltamem.bench.systems`, with this llm and embedder)."""

    llm: LLM | None = None  # the systems' model, which also answers
    embedder: Embedder | None = None
    judge: LLM | None = None  # None: no judge runs (judge-free metrics only)
    make: Make | None = None


@runtime_checkable
class Task(Protocol):
    """A benchmark as the harness runs it."""

    name: str  # as on the command line
    title: str  # as in reports
    data: tuple[str, ...]  # the files DATA names, in order (for help and errors)

    def options(self) -> dict[str, Any]:
        """The task's own options (`--set NAME=VALUE`), each with its default."""
        ...

    def check(self, spec: RunSpec) -> None:
        """Raise TaskError for a file count or option the task cannot take, before
        any model is loaded."""
        ...

    def dataset(self, spec: RunSpec) -> Sequence[Any]:
        """The items the run would evaluate (users, conversations, ...), loaded and
        selected as `run` does: a way to check the data before a long run."""
        ...

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        """The resumable loop: OUT/results.jsonl item by item, then `write_metrics`."""
        ...

    def write_metrics(self, out: Path) -> dict[str, Any]:
        """OUT/metrics.json (and the report) from what OUT holds."""
        ...

    def page(self, metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
        """The run's tables and charts, for report.html and `bench tables` alike."""
        ...


def load_object(spec: str, what: str) -> Any:
    """The object `package.module:NAME` names, with a clear error when it cannot be
    found (`what` says what it was meant to be, for the message)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise TaskError(f"{what} {spec!r}: write it as package.module:Name")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the project at hand
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise TaskError(
            f"{what} {spec!r}: no module {exc.name!r} (is its directory on PYTHONPATH?)"
        ) from exc
    except Exception as exc:  # the module itself failed to import
        raise TaskError(
            f"{what} {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise TaskError(f"{what} {spec!r}: module {module_name} has no {attr!r}") from None


def get_task(name: str) -> Task:
    """The registered task called `name`, or the Task object `package.module:NAME`
    names (a class is instantiated)."""
    spec = TASKS.get(name, name)
    if ":" not in spec:
        raise TaskError(f"unknown task {name!r}; choose from {', '.join(TASKS)} or pkg.mod:Task")
    obj = load_object(spec, "task")
    if isinstance(obj, type) and all(hasattr(obj, m) for m in ("run", "page", "dataset")):
        obj = obj()
    if not isinstance(obj, Task):
        raise TaskError(f"task {name!r} is not a Task (see deltamem.bench.task.Task)")
    return obj


def task_of(metrics: dict[str, Any]) -> str:
    """The task a metrics.json is from: its `benchmark` field, else (runs from before
    that field) LoCoMo when it has categories and HaluMem otherwise."""
    first: Any = next(iter(metrics.values()), {})
    if not isinstance(first, dict):
        return "halumem"
    if isinstance(first.get("benchmark"), str) and first["benchmark"]:
        return str(first["benchmark"])
    return "locomo" if "by_category" in first else "halumem"


# --- the five runners, wrapped ---------------------------------------------------------------
# RunSpec fields and the run-dataclass field each fills (absent there: the task
# does not take that option)
_COMMON = {"out", "systems", "resume", "progress", "qa_k", "answer", "judge_mode", "only"}


class RunnerTask:
    """A `Task` over a runner with a run dataclass of its own (`config`): `build`
    fills it from a RunSpec; its other fields are the task's options."""

    name: str = ""
    title: str = ""
    data: tuple[str, ...] = ("FILE",)
    config: type  # the runner's run dataclass
    data_fields: ClassVar[tuple[str, ...]] = ("data",)  # its fields DATA fills, in order
    limit_field: ClassVar[str | None] = None  # its field --limit sets
    extra_options: ClassVar[dict[str, Any]] = {}  # options the task reads itself

    def options(self) -> dict[str, Any]:
        skip = _COMMON | set(self.data_fields) | {self.limit_field}
        own = {
            f.name: f.default
            for f in dataclasses.fields(self.config)
            if f.name not in skip and f.default is not dataclasses.MISSING
        }
        return own | self.extra_options

    def build(self, spec: RunSpec) -> Any:
        """The runner's run object for this spec (its own options from spec.options)."""
        if len(spec.data) != len(self.data_fields):
            raise TaskError(
                f"{self.name} reads {len(self.data_fields)} file(s): {' '.join(self.data)}"
            )
        names = {f.name for f in dataclasses.fields(self.config)}
        kw: dict[str, Any] = dict(zip(self.data_fields, spec.data, strict=True))
        kw |= {"out": spec.out, "systems": list(spec.systems), "resume": spec.resume}
        kw["progress"] = spec.progress
        given = [
            ("--limit", self.limit_field, spec.limit, spec.limit is not None),
            ("--only", "only", tuple(spec.only), bool(spec.only)),
            ("--k", "qa_k", spec.k, spec.k is not None),
            ("--no-answers", "answer", spec.answer, not spec.answer),
        ]
        for option, name, value, set_ in given:
            if not set_:
                continue
            if name is None or name not in names:
                raise TaskError(f"{self.name} takes no {option}")
            kw[name] = value
        if "judge_mode" in names:
            kw["judge_mode"] = spec.judge_mode
        own = self.options()
        for key, value in spec.options.items():
            if key not in own:
                raise TaskError(
                    f"{self.name} has no option {key!r}; its options: {', '.join(own) or 'none'}"
                )
            if key in names:
                kw[key] = value
        return self.config(**kw)

    def check(self, spec: RunSpec) -> None:
        self.build(spec)

    def option(self, spec: RunSpec, key: str) -> Any:
        """One of the task's own options: the spec's value, else its default."""
        return spec.options.get(key, self.options()[key])


# --- options on the command line ---------------------------------------------------------
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(hint: Any, text: str, key: str) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if text.lower() == "none" and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise TaskError(f"option {key}: {text!r} is not a yes/no value")
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            raise TaskError(f"option {key}: {text!r} is not a number") from None
    return text


def parse_options(task: Task, pairs: Sequence[str]) -> dict[str, Any]:
    """`--set NAME=VALUE` pairs as the task's options, each converted to the type
    of its field (yes/no, a number, `none`, text)."""
    own = task.options()
    config = getattr(task, "config", None)
    hints = typing.get_type_hints(config) if config is not None else {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in own:
            raise TaskError(
                f"--set {pair!r}: {task.name}'s options are {', '.join(own) or 'none'} "
                "(written NAME=VALUE)"
            )
        default = own[key]
        hint = hints.get(key, type(default) if default is not None else str)
        out[key] = _convert(hint, text.strip(), key)
    return out
