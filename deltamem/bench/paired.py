"""Two systems' answers to the same questions, compared question by question.

A benchmark's question set is small (28 HaluMem questions for a dev user), and a
1.5B answerer moves a few answers with any change to its prompt. A difference of
one or two questions between two systems is then within what chance gives. This
module pairs the two systems' records by question, counts where they differ,
and says how sure the difference is: a paired bootstrap interval of the
difference of the means (the questions resampled, both systems' outcomes kept
together) and, for right/wrong outcomes, McNemar's exact test on the questions
only one system got right. On HaluMem the evaluated sessions are paired too, by
their memory-state F1 against the session's gold points: how a change to the
write path moves `state_f1`, session by session (two runs of one system, one
with the change, compare as well as two systems).

    deltamem bench compare runs/u3-deltamem runs/u3-retrieval
    deltamem bench compare runs/h1 runs/h1 --systems deltamem,retrieval
    deltamem bench compare runs/u0-dm runs/u0-rt runs/u3-dm runs/u3-rt   # pooled
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.log import judged_records
from deltamem.bench.metrics.halumem import normalise_verdict
from deltamem.bench.metrics.locomo import HEADLINE_CATEGORIES

Record = dict[str, Any]
RESAMPLES = 10_000
LEVEL = 0.95


class CompareError(ValueError):
    """The two runs cannot be compared (no questions, an ambiguous system)."""


def _halumem_correct(r: Record) -> float | None:
    v = normalise_verdict(r.get("verdict"))
    return None if v is None else float(v == "correct")


def _locomo_judge(r: Record) -> float | None:
    j = r.get("judge")
    return None if j is None else float(bool(j))


def _number(field: str) -> Callable[[Record], float | None]:
    def read(r: Record) -> float | None:
        v = r.get(field)
        return None if v is None else float(v)

    return read


# per benchmark: (figure, how a record gives it, whether it is right/wrong)
FIGURES: dict[str, list[tuple[str, Callable[[Record], float | None], bool]]] = {
    "halumem": [
        ("QA correct", _halumem_correct, True),
        ("answer F1", _number("answer_f1"), False),
        ("evidence coverage", _number("evidence_coverage"), False),
        ("evidence recall", _number("evidence_recall"), False),
    ],
    "locomo": [
        ("judge", _locomo_judge, True),
        ("F1", _number("f1"), False),
        ("evidence recall", _number("evidence_recall"), False),
    ],
}


def _state_f1(r: Record) -> float | None:
    state = r.get("state")
    return None if not state else float(state["r_trans"])


# per benchmark, the figures paired by evaluated session rather than by question
SESSION_FIGURES: dict[str, list[tuple[str, Callable[[Record], float | None], bool]]] = {
    "halumem": [("state F1 (a session)", _state_f1, False)],
    "locomo": [],
}


@dataclass(frozen=True)
class Paired:
    """One figure over the questions (or HaluMem's evaluated sessions) both systems
    have."""

    figure: str
    n: int
    a: float  # mean of system A
    b: float  # mean of system B
    diff: float  # b - a
    low: float  # bootstrap interval of diff, at LEVEL
    high: float
    b_only: int | None = None  # right/wrong figures: questions only B got right
    a_only: int | None = None
    p_value: float | None = None  # McNemar's exact test (two-sided)


def question_records(
    run: Path, records: Sequence[Record], system: str | None
) -> tuple[str, dict[str, Record]]:
    """The run's question records of one system, keyed by the question (the key
    without the system's name); `records`: the run's, with the verdicts its judges
    stored (`judged_records`)."""
    records = [r for r in records if r.get("kind") == "question"]
    systems = list(dict.fromkeys(str(r.get("system")) for r in records))
    if system is None:
        # a run answered again keeps the other systems' records unanswered
        answered = list(
            dict.fromkeys(str(r.get("system")) for r in records if r.get("prediction") is not None)
        )
        if len(answered) != 1:
            raise CompareError(
                f"{run} holds answers of {answered or systems}: name the system to compare"
            )
        system = answered[0]
    if system not in systems:
        raise CompareError(f"{run} holds no question of system {system!r} (it has {systems})")
    # LoCoMo's headline figures leave out category 5 (adversarial): so does this
    return system, {
        str(r["key"]).split("|", 1)[1]: r
        for r in records
        if r.get("system") == system and not _off_headline(r)
    }


def session_records(records: Sequence[Record], system: str) -> dict[str, Record]:
    """A run's evaluated (not filler) session records of `system`, keyed as
    `question_records` keys questions."""
    return {
        str(r["key"]).split("|", 1)[1]: r
        for r in records
        if r.get("kind") == "session" and r.get("system") == system and not r.get("filler")
    }


def _off_headline(r: Record) -> bool:
    return "category" in r and r["category"] not in HEADLINE_CATEGORIES


def bootstrap_interval(
    a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of mean(b) - mean(a), resampling the questions as pairs."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(a), size=(resamples, len(a)))
    diffs = (b[picks] - a[picks]).mean(axis=1)
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    return float(low), float(high)


def mcnemar_exact(b_only: int, a_only: int) -> float:
    """Two-sided exact McNemar p: the discordant questions as fair coin flips."""
    from scipy.stats import binomtest

    n = b_only + a_only
    return 1.0 if n == 0 else float(binomtest(b_only, n, 0.5).pvalue)


def pair_figure(
    figure: str,
    read: Callable[[Record], float | None],
    binary: bool,
    a: dict[str, Record],
    b: dict[str, Record],
) -> Paired | None:
    pairs = [(read(a[k]), read(b[k])) for k in a if k in b]
    both = [(x, y) for x, y in pairs if x is not None and y is not None]
    if not both:
        return None
    xa, xb = np.array(both, dtype=float).T
    low, high = bootstrap_interval(xa, xb)
    extra: dict[str, Any] = {}
    if binary:
        b_only, a_only = int(((xb == 1) & (xa == 0)).sum()), int(((xa == 1) & (xb == 0)).sum())
        extra = {"b_only": b_only, "a_only": a_only, "p_value": mcnemar_exact(b_only, a_only)}
    return Paired(
        figure,
        len(both),
        float(xa.mean()),
        float(xb.mean()),
        float(xb.mean() - xa.mean()),
        low,
        high,
        **extra,
    )


def benchmark_of(records: Sequence[Record]) -> str:
    return "locomo" if any("category" in r for r in records) else "halumem"


def compare_runs(
    run_a: Path | Sequence[Path],
    run_b: Path | Sequence[Path],
    system_a: str | None = None,
    system_b: str | None = None,
) -> dict[str, Any]:
    """Every paired figure of system A (in run_a) against system B (in run_b).
    Several runs a side (two users, two conversations: run_a[i] beside run_b[i])
    pool their questions: a question's key names its user or conversation."""
    runs_a = [run_a] if isinstance(run_a, Path) else list(run_a)
    runs_b = [run_b] if isinstance(run_b, Path) else list(run_b)
    if len(runs_a) != len(runs_b) or not runs_a:
        raise CompareError("give as many runs of B as of A")
    a: dict[str, Record] = {}
    b: dict[str, Record] = {}
    sa: dict[str, Record] = {}
    sb: dict[str, Record] = {}
    names_a, names_b = set(), set()
    loaded: dict[Path, list[Record]] = {}  # a run read once, though it may hold A and B

    def records_of(run: Path) -> list[Record]:
        if run not in loaded:
            loaded[run] = judged_records(run)
        return loaded[run]

    for ra, rb in zip(runs_a, runs_b, strict=True):
        name_a, qa = question_records(ra, records_of(ra), system_a)
        name_b, qb = question_records(rb, records_of(rb), system_b)
        if not set(qa) & set(qb):
            raise CompareError(f"{ra} and {rb} share no question")
        names_a.add(name_a)
        names_b.add(name_b)
        a.update(qa)
        b.update(qb)
        sa.update(session_records(records_of(ra), name_a))
        sb.update(session_records(records_of(rb), name_b))
    benches = {benchmark_of(list(a.values())), benchmark_of(list(b.values()))}
    if len(benches) != 1:
        raise CompareError("the runs are of different benchmarks")
    bench = benches.pop()
    rows = [pair_figure(f, read, binary, a, b) for f, read, binary in FIGURES[bench]]
    rows += [pair_figure(f, read, binary, sa, sb) for f, read, binary in SESSION_FIGURES[bench]]
    return {
        "benchmark": bench,
        "a": {"runs": [str(r) for r in runs_a], "system": ", ".join(sorted(names_a))},
        "b": {"runs": [str(r) for r in runs_b], "system": ", ".join(sorted(names_b))},
        "level": LEVEL,
        "resamples": RESAMPLES,
        "figures": [asdict(r) for r in rows if r is not None],
    }


def markdown(result: dict[str, Any]) -> str:
    a, b = result["a"], result["b"]
    level = round(result["level"] * 100)
    lines = [
        f"A = `{a['system']}` ({', '.join(a['runs'])}), "
        f"B = `{b['system']}` ({', '.join(b['runs'])})",
        "",
        f"| figure | n | A | B | B − A | {level}% interval | only B right | only A right "
        "| McNemar p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["figures"]:
        binary = r["p_value"] is not None
        lines.append(
            f"| {r['figure']} | {r['n']} | {r['a']:.3f} | {r['b']:.3f} | {r['diff']:+.3f} "
            f"| {r['low']:+.3f} … {r['high']:+.3f} "
            + (f"| {r['b_only']} | {r['a_only']} | {r['p_value']:.2f} |" if binary else "| | | |")
        )
    return "\n".join(lines)
