"""The MemBench runner (SPEC §4.3).

Per system, per trajectory (its own user): the steps are added one at a time,
each a session of its own with its time and place (participation steps as a
user and an assistant turn, observation steps as a third-person message with
role user); with `noise` > 0, that many steps drawn from other trajectories of
the same scenario are added after them, before the question (the capacity
test: the history grows between the evidence and the question). Then
search(question, k) and a multiple-choice answer: the model picks one letter
from the retrieved items and the choices (`bench/choice.py`).

Scored without a judge: the chosen letter against `ground_truth`; recall@k of
`target_step_id` among the steps the retrieved items came from (provenance:
session `step_<i>` is step i); write time per step and read time per question.
One record per step and per question in OUT/results.jsonl; --resume skips what
is there (the trajectory's memory is rebuilt by adding its steps again).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem.bench.answering import as_search_hits, error_text
from deltamem.bench.choice import ChoiceAnswerer
from deltamem.bench.datasets import BenchSession
from deltamem.bench.datasets import membench as ds
from deltamem.bench.log import RESULTS, ResultLog
from deltamem.bench.metrics import membench as mb
from deltamem.bench.metrics import qa
from deltamem.bench.metrics.cost import cost_metrics
from deltamem.bench.progress import Progress, declare, tick
from deltamem.bench.runner import (
    Make,
    add_logged,
    each_system,
    finish,
    reached_by_rank,
    required,
    search,
    write_run_metrics,
)
from deltamem.bench.systems import MemorySystem
from deltamem.bench.systems.base import count_tokens
from deltamem.bench.task import Models, RunnerTask, RunSpec
from deltamem.embed import Embedder
from deltamem.llm.base import LLM

if TYPE_CHECKING:
    from deltamem.bench.render import Block

QA_K = 10
METRICS = "metrics.json"


@dataclass
class MemBenchRun:
    data: Path
    out: Path
    systems: Sequence[str]
    trajectories: int | None = None  # the first N trajectories of the file
    per_group: int | None = None  # the first N of each question type × group list
    noise: int = 0  # noise steps from other trajectories, inserted before the question
    seed: int = 0  # which noise steps (deterministic per trajectory and seed)
    resume: bool = False
    qa_k: int = QA_K
    progress: Progress | None = None


def select(trajs: Sequence[ds.Trajectory], run: MemBenchRun) -> list[ds.Trajectory]:
    out: list[ds.Trajectory] = []
    per: dict[tuple[str, str], int] = {}
    for t in trajs:
        group = (t.qa_type, t.scenario)
        if run.per_group is not None and per.get(group, 0) >= run.per_group:
            continue
        per[group] = per.get(group, 0) + 1
        out.append(t)
    return out[: run.trajectories] if run.trajectories is not None else out


Pool = dict[str, list[tuple[str, ds.MBStep]]]  # scenario -> (trajectory key, step)


def noise_pool(trajs: Sequence[ds.Trajectory]) -> Pool:
    pool: Pool = {}
    for t in trajs:
        pool.setdefault(t.setting, []).extend((t.key, s) for s in t.steps)
    return pool


def draw_noise(pool: Pool, traj: ds.Trajectory, n: int, seed: int) -> list[ds.MBStep]:
    """n steps of other trajectories, of the same scenario where there are any,
    chosen by a generator seeded with (seed, trajectory): the same on every run."""
    if n <= 0:
        return []
    items = pool.get(traj.setting, [])
    others = sum(1 for key, _ in items if key != traj.key)
    if not others:  # no other trajectory of this scenario: any other will do
        items = [x for xs in pool.values() for x in xs]
        others = sum(1 for key, _ in items if key != traj.key)
    if not others:
        return []
    rng = random.Random(f"{seed}:{traj.key}")
    picked: list[ds.MBStep] = []
    seen: set[int] = set()
    while len(picked) < n:
        i = rng.randrange(len(items))
        if items[i][0] == traj.key or (i in seen and len(seen) < others):
            continue
        seen.add(i)
        picked.append(items[i][1])
    return picked


def sessions_of(traj: ds.Trajectory, noise: list[ds.MBStep]) -> list[BenchSession]:
    """The trajectory's steps, then the noise steps (dated like the last step)."""
    out = [traj.step_session(i) for i in range(len(traj.steps))]
    last = next((s.timestamp for s in reversed(out) if s.timestamp), None)
    for j, step in enumerate(noise):
        undated = step.model_copy(update={"time": None})
        out.append(ds.step_to_session(undated, f"noise_{j}", f"noise_{j}", last))
    return out


def user_id(traj: ds.Trajectory, noise: int) -> str:
    return f"mb:{traj.key}:n{noise}".replace("/", "_")


def run_membench(
    run: MemBenchRun, *, llm: LLM | None, embedder: Embedder | None, make: Make | None = None
) -> dict[str, Any]:
    answerer = ChoiceAnswerer(required(llm, "choosing the answers"))
    everything = list(ds.iter_trajectories(run.data))
    trajs = select(everything, run)
    run.out.mkdir(parents=True, exist_ok=True)
    log = ResultLog(run.out / RESULTS, resume=run.resume)
    pool = noise_pool(everything) if run.noise > 0 else {}
    noise = {t.key: draw_noise(pool, t, run.noise, run.seed) for t in trajs}
    n = len(run.systems)
    steps = sum(len(t.steps) + len(noise[t.key]) for t in trajs)
    declare(run.progress, {"steps": n * steps, "questions": n * len(trajs)})
    try:
        for system, fresh in each_system(run.systems, run.out, run.resume, llm, embedder, make):
            for t in trajs:
                _trajectory(run, system, log, answerer, t, noise[t.key], fresh)
    finally:
        log.close()
    return write_metrics(run.out)


def _trajectory(
    run: MemBenchRun,
    system: MemorySystem,
    log: ResultLog,
    answerer: ChoiceAnswerer,
    traj: ds.Trajectory,
    noise: list[ds.MBStep],
    fresh: bool,
) -> None:
    uid = user_id(traj, run.noise)
    prefix = f"{system.name}|{uid}"
    done = f"{prefix}|done"
    if log.has(done):
        tick(run.progress, "steps", len(traj.steps) + len(noise))
        tick(run.progress, "questions")
        return
    if fresh:
        system.reset(uid)
    sessions = sessions_of(traj, noise)
    turn_ids: dict[str, list[str]] = {}
    for i, bench in enumerate(sessions):
        turn_ids[bench.session_id] = bench.turn_ids
        fields = {"session": i, "noise": i >= len(traj.steps)}
        add_logged(system, log, uid, bench, f"{prefix}|session|{i}", fields)
        tick(run.progress, "steps")  # logged before or not: the step was added
    key = f"{prefix}|question"
    if not log.has(key):
        log.write(_question(run, system, answerer, traj, sessions, turn_ids, uid, key))
    tick(run.progress, "questions")
    finish(system, log, uid, done)


def _question(
    run: MemBenchRun,
    system: MemorySystem,
    answerer: ChoiceAnswerer,
    traj: ds.Trajectory,
    sessions: list[BenchSession],
    turn_ids: dict[str, list[str]],
    uid: str,
    key: str,
) -> dict[str, Any]:
    q = traj.qa
    last = next((s.timestamp for s in reversed(sessions) if s.timestamp), None)
    asked_at = ds.when(q.time) or last or datetime.now(UTC)
    rec: dict[str, Any] = {
        "key": key,
        "kind": "question",
        "system": system.name,
        "user": uid,
        "qa_type": traj.qa_type,
        "group": traj.scenario,
        "tid": traj.tid,
        "scenario": traj.setting,
        "level": traj.level,
        "noise": len(sessions) - len(traj.steps),
        "history_steps": len(sessions),
        "history_tokens": sum(count_tokens(m["content"]) for s in sessions for m in s.messages),
        "question": q.question,
        "choices": q.choices,
        "ground_truth": q.ground_truth,
        "target_step_id": q.target_step_id,
    }
    found = search(system, uid, q.question, run.qa_k)
    rec |= found.fields()
    ranked = reached_by_rank(found.found, turn_ids)
    rec["reached"] = ranked
    targets = [str(t) for t in q.target_step_id]
    rec["recall_at"] = {str(k): qa.recall_at_k(targets, ranked, k) for k in qa.cutoffs(run.qa_k)}
    rec["recall"] = qa.recall_at_k(targets, ranked, run.qa_k)
    rec["prediction"] = None
    t0 = time.perf_counter()
    if not q.choices:
        rec["error"] = rec["error"] or "no choices"
    else:
        try:
            hits = as_search_hits(found.found, uid, asked_at)
            rec["prediction"] = answerer.choose(q.question, q.choices, hits, asked_at)
        except Exception as exc:
            rec["error"] = rec["error"] or error_text(exc)
    rec["answer_seconds"] = time.perf_counter() - t0
    gold = q.ground_truth.strip().upper()
    pred = (rec["prediction"] or "").strip().upper()
    rec["correct"] = (pred == gold) if gold else None
    return rec


def write_metrics(out: Path) -> dict[str, Any]:
    return write_run_metrics(
        out, lambda rs: {"benchmark": "membench", **mb.aggregate(rs), "cost": cost_metrics(rs)}
    )


class MemBenchTask(RunnerTask):
    """MemBench as a `Task` (bench/task.py): `run_membench` on a MemBenchRun."""

    name = "membench"
    title = "MemBench"
    data = ("FirstAgentDataLowLevel.json",)
    config = MemBenchRun
    limit_field = "trajectories"

    def dataset(self, spec: RunSpec) -> list[ds.Trajectory]:
        run = self.build(spec)
        return select(list(ds.iter_trajectories(run.data)), run)

    def run(self, spec: RunSpec, models: Models) -> dict[str, Any]:
        return run_membench(
            self.build(spec), llm=models.llm, embedder=models.embedder, make=models.make
        )

    def write_metrics(self, out: Path) -> dict[str, Any]:
        return write_metrics(out)

    def page(self, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
        from deltamem.bench.report_qa import membench_page

        return membench_page(metrics, records)


TASK = MemBenchTask()
