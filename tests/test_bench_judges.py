"""LLM judges (scripted), verdicts flowing into metrics, the cache; the LoCoMo runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from test_bench_halumem import FIX, make_llm, records

from deltamem.bench.halumem import HaluMemRun, run_halumem, write_metrics
from deltamem.bench.judges.base import PROMPTS, JudgeCache
from deltamem.bench.judges.halumem import JUDGMENTS, judge_run
from deltamem.bench.locomo import LocomoRun, reached_turns, run_locomo
from deltamem.bench.systems.base import Retrieved
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

LOCOMO_FIX = Path(__file__).parent / "fixtures" / "locomo_tiny.json"

# the scripted model answers with whole operation lists
pytestmark = pytest.mark.usefixtures("session_strategy")


def rubric(name: str) -> str:
    return (PROMPTS / f"{name}.system.txt").read_text(encoding="utf-8").strip()


def judge_reply(messages: list[ChatMessage]) -> Any:
    system, item = messages[0]["content"], messages[-1]["content"]
    if system == rubric("integrity"):
        fact = item.rsplit("Reference fact:", 1)[1]
        if "jazz" in fact:
            return {"reason": "not stored", "score": 0}
        return {"reason": "covered", "score": 2 if "Pixel" in fact else 1}
    if system == rubric("accuracy"):
        return {"reason": "supported", "score": 2, "included": True}
    if system == rubric("update"):
        return {"reason": "new city present", "verdict": "correct"}
    if system == rubric("qa"):
        pred = item.rsplit("Assistant's answer:", 1)[1]
        return {"reason": "-", "verdict": "omission" if "not known" in pred else "correct"}
    if system == rubric("locomo"):
        return {
            "reason": "-",
            "label": "CORRECT" if "Comet" in item.split("Generated")[1] else "WRONG",
        }
    raise AssertionError("unexpected prompt")


def test_templates_put_the_item_last() -> None:
    for name in ("integrity", "accuracy", "update", "qa", "locomo"):
        item = (PROMPTS / f"{name}.item.txt").read_text(encoding="utf-8").strip()
        last_var = item.rsplit("$", 1)[1]
        assert item.endswith("$" + last_var)


def test_halumem_judges_fill_metrics_and_cache(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], users=1),
        llm=make_llm(),
        embedder=embedder,
    )
    judge = ScriptedLLM(default=judge_reply)
    added = judge_run(out, FIX, judge, mode="rubric")
    assert added > 0
    m = write_metrics(out)["deltamem"]
    ext = m["extraction"]
    # user 1 points: Leeds job (score 1, w 0.8), Pixel (2, w 0.4), jazz distractor (0)
    assert ext["recall"] == pytest.approx(0.5)
    assert ext["weighted_recall"] == pytest.approx((0.8 * 0.5 + 0.4 * 1) / 1.2)
    assert ext["fmr"] == 1.0 and ext["accuracy"] == 1.0 and ext["target_precision"] == 1.0
    assert ext["f1"] == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert m["update"]["correct"] == 1.0
    assert m["qa"]["correct"] == pytest.approx(2 / 3)
    assert m["qa"]["by_type"]["Memory Boundary"]["omission"] == 1.0
    assert m["qa_by_session"][-1]["n"] == 3

    # judged keys are not judged again; a fresh judgments file is served by the cache
    assert judge_run(out, FIX, ScriptedLLM(), mode="rubric") == 0
    (out / JUDGMENTS).unlink()
    assert judge_run(out, FIX, ScriptedLLM(default=judge_reply), mode="rubric") == added
    cached = ScriptedLLM()  # would raise if called
    (out / JUDGMENTS).unlink()
    cached.name = judge.name
    assert judge_run(out, FIX, cached, mode="rubric") == added and cached.requests == []


def test_run_without_answers_makes_no_answer_calls_and_qa_is_not_judged(
    tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "run"
    llm = make_llm()
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], users=1, answer=False),
        llm=llm,
        embedder=embedder,
    )
    assert llm.requests  # the manager ran ...
    assert all(r["schema"] is not None for r in llm.requests)  # ... but no free-text answer
    qs = [r for r in records(out) if r["kind"] == "question"]
    assert qs and all(q["prediction"] is None and q["not_answered"] for q in qs)
    assert any(q["evidence_recall"] is not None for q in qs)  # judge-free QA side kept
    judge_run(out, FIX, ScriptedLLM(default=judge_reply), mode="rubric")
    m = write_metrics(out)["deltamem"]
    assert m["qa"]["correct"] is None  # no question was judged: no QA figure, not 0
    assert m["update"]["correct"] == 1.0  # the other judges still ran
    assert m["extraction"]["recall"] == pytest.approx(0.5)


def test_cache_key_depends_on_content() -> None:
    a = JudgeCache.key("m", [{"role": "user", "content": "x"}], {"type": "object"})
    b = JudgeCache.key("m", [{"role": "user", "content": "y"}], {"type": "object"})
    assert a != b and len(a) == 64


def test_reached_turns_maps_provenance_to_dia_ids() -> None:
    ids = {"session_1": ["D1:1", "D1:2"], "session_2": ["D2:1"]}
    found = [
        Retrieved("x", session_id="session_1", turns=[1, 5]),
        Retrieved("y", session_id="session_2", turns=[0]),
        Retrieved("z"),
    ]
    assert reached_turns(found, ids) == ["D1:2", "D2:1"]


def locomo_answer(messages: list[ChatMessage]) -> Any:
    text = messages[-1]["content"]
    if "name of Ann's dog" in text:
        return "Comet"
    if "instrument" in text:
        return "The cello."
    if "activities" in text:
        return "hiking, swimming"
    return "That is not mentioned anywhere."


def test_locomo_runner_with_judge(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "loc"
    run = LocomoRun(data=LOCOMO_FIX, out=out, systems=["retrieval"], judge_mode="rubric")
    m = run_locomo(
        run,
        llm=ScriptedLLM(default=locomo_answer),
        embedder=embedder,
        judge=ScriptedLLM(default=judge_reply),
    )["retrieval"]
    # f1: dog 1, cello 1 (P 1/1 after dropping "the"), activities 0.5 → mean 2.5/3
    assert m["f1"] == pytest.approx(2.5 / 3)
    assert m["n"] == 3 and m["judge"] == pytest.approx(1 / 3)
    assert m["by_category"]["adversarial"]["f1"] == 1.0
    assert m["by_category"]["adversarial"]["judge"] is None
    assert m["evidence_recall"] == 1.0  # 5 turns, top-20 retrieval reaches all
    assert m["cost"]["llm_calls_per_session"] == 0
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["retrieval"]["f1"] == pytest.approx(m["f1"])
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    q = next(r for r in recs if r.get("kind") == "question")
    assert q["reached"] and q["prediction"] == "Comet"


def test_locomo_write_pass_without_answers_is_answered_later(
    tmp_path: Path, embedder: Embedder
) -> None:
    from deltamem.bench.reanswer import ReanswerRun, reanswer

    out = tmp_path / "loc"
    run = LocomoRun(data=LOCOMO_FIX, out=out, systems=["retrieval"], answer=False)
    llm = ScriptedLLM(default=locomo_answer)
    m = run_locomo(run, llm=llm, embedder=embedder, judge=ScriptedLLM(default=judge_reply))
    assert llm.requests == []  # no answer call, and no judge without answers
    assert m["retrieval"]["f1"] is None and m["retrieval"]["evidence_recall"] == 1.0
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    qs = [r for r in recs if r["kind"] == "question"]
    assert qs and all(q["prediction"] is None and q["not_answered"] and q["hits"] for q in qs)

    again = tmp_path / "again"
    assert reanswer(ReanswerRun(source=out, out=again), llm) == len(qs)
    done = [json.loads(x) for x in (again / "results.jsonl").read_text().splitlines()]
    dog = next(r for r in done if r.get("question") == "What is the name of Ann's dog?")
    assert dog["prediction"] == "Comet" and dog["f1"] == 1.0 and "not_answered" not in dog

    from deltamem.bench.locomo import judge_answers

    judge = ScriptedLLM(default=judge_reply)
    assert judge_answers(again, judge, "rubric") == 3  # the adversarial one is not judged
    judged = [json.loads(x) for x in (again / "results.jsonl").read_text().splitlines()]
    assert sum(r.get("judge") is True for r in judged) == 1
    assert judge_answers(again, judge, "rubric") == 0  # nothing judged twice

    # the headline's categories alone: the adversarial question is copied unanswered
    some = tmp_path / "some"
    assert reanswer(ReanswerRun(source=out, out=some, categories=(1, 2, 3, 4)), llm) == 3
    kept = [json.loads(x) for x in (some / "results.jsonl").read_text().splitlines()]
    adv = [r for r in kept if r.get("kind") == "question" and r["category"] == 5]
    assert adv and all(r["prediction"] is None and r["not_answered"] for r in adv)


def test_locomo_session_limit_keeps_answerable_questions(
    tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "loc"
    run = LocomoRun(data=LOCOMO_FIX, out=out, systems=["recent"], sessions=1)
    run_locomo(run, llm=ScriptedLLM(default=locomo_answer), embedder=embedder)
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["question"] for r in recs if r["kind"] == "question"] == [
        "What is the name of Ann's dog?"
    ]


def test_judges_can_be_narrowed_and_the_rest_added_later(
    tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], users=1),
        llm=make_llm(),
        embedder=embedder,
    )
    judge_run(out, FIX, ScriptedLLM(default=judge_reply), kinds=frozenset({"qa"}), mode="rubric")
    m = write_metrics(out)["deltamem"]
    assert m["qa"]["correct"] == pytest.approx(2 / 3)
    assert m["extraction"]["recall"] is None and m["update"]["correct"] is None
    assert (
        judge_run(out, FIX, ScriptedLLM(default=judge_reply), mode="rubric") > 0
    )  # the others now
    assert write_metrics(out)["deltamem"]["extraction"]["recall"] == pytest.approx(0.5)
