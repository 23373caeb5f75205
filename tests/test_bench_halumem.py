"""The HaluMem runner end to end on a tiny fixture, with a scripted LLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM, add, ops

from deltamem.bench.halumem import HaluMemRun, run_halumem
from deltamem.bench.log import read_records
from deltamem.bench.systems.base import Retrieved
from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage

FIX = Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"
ANSWER_SYSTEM = (
    Path(__file__).parent.parent / "deltamem" / "prompts" / "answer_system.txt"
).read_text(encoding="utf-8")

# the scripted model answers with whole operation lists
pytestmark = pytest.mark.usefixtures("session_strategy")


def scripted_reply(messages: list[ChatMessage]) -> Any:
    """Manager calls get operations chosen by what the session says; answer calls
    get a short answer."""
    text = messages[-1]["content"]
    if messages[0]["content"] == ANSWER_SYSTEM:
        if "Which city" in text:
            return "York."
        if "dog" in text:
            return "That is not known from memory."
        return "She is a nurse in Leeds."
    convo = text
    if "York instead of Leeds" in convo:
        return ops(add("Dana Reyes now works as a nurse in York, having moved from Leeds."))
    if "Pixel keeps me company" in convo:
        return ops(
            add("Dana Reyes works as a nurse at a clinic in Leeds."),
            add("Dana Reyes has a cat named Pixel."),
        )
    return ops()


def make_llm() -> ScriptedLLM:
    return ScriptedLLM(default=scripted_reply)


def records(out: Path) -> list[dict[str, Any]]:
    return list(read_records(out / "results.jsonl"))


def test_end_to_end_judge_free(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    llm = make_llm()
    run = HaluMemRun(data=FIX, out=out, systems=["deltamem", "retrieval"])
    metrics = run_halumem(run, llm=llm, embedder=embedder)
    recs = records(out)
    keys = [r["key"] for r in recs]
    assert len(keys) == len(set(keys))

    dm = [r for r in recs if r["system"] == "deltamem"]
    kinds = [r["kind"] for r in dm]
    # user 1: 3 sessions (one filler); user 2: 1 session
    assert kinds.count("session") == 4 and kinds.count("user_done") == 2
    assert kinds.count("update") == 1  # the York point; the Leeds point goes to integrity
    assert kinds.count("question") == 3 + 1
    assert kinds.count("point") == 3 + 3  # 2 real + 1 distractor, per user
    s0 = next(r for r in dm if r["kind"] == "session" and r["session"] == 0)
    assert s0["memories"] == [
        "Dana Reyes works as a nurse at a clinic in Leeds.",
        "Dana Reyes has a cat named Pixel.",
    ]
    assert s0["state"]["r_trans"] == pytest.approx(1.0)
    filler = next(r for r in dm if r["kind"] == "session" and r["session"] == 1)
    assert filler["filler"] and "state" not in filler
    upd = next(r for r in dm if r["kind"] == "update")
    assert upd["retrieved_hit"] and len(upd["retrieved"]) <= 10
    q = next(r for r in dm if r["kind"] == "question" and "Which city" in r["question"])
    assert q["prediction"] == "York." and q["evidence_recall"] == 1.0

    m = json.loads((out / "metrics.json").read_text())
    assert m == json.loads(json.dumps(metrics))
    assert set(m) == {"deltamem", "retrieval"}
    ext = m["deltamem"]["extraction"]
    assert set(ext) >= {
        "recall",
        "weighted_recall",
        "target_precision",
        "accuracy",
        "fmr",
        "f1",
        "state_f1",
    }
    assert ext["recall"] is None and ext["f1"] is None  # no judge ran
    assert ext["state_f1"] == pytest.approx(1.0)
    assert m["deltamem"]["update"]["correct"] is None
    assert set(m["deltamem"]["qa"]) >= {"correct", "hallucination", "omission", "by_type"}
    cost = m["deltamem"]["cost"]
    assert set(cost) >= {
        "llm_calls_per_session",
        "prompt_tokens_per_session",
        "session_tokens_per_session",
        "write_amplification",
        "qpm",
        "add_seconds",
        "search_seconds",
    }
    assert cost["llm_calls_per_session"] > 0 and cost["write_amplification"] > 0
    assert m["retrieval"]["cost"]["llm_calls_per_session"] == 0
    assert m["retrieval"]["extraction"]["state_f1"] < 0.5  # raw turns are not facts
    assert m["deltamem"]["retrieval"]["update_hit_at_10"] == 1.0
    assert cost["qpm"] == 0.0  # no search rounds: no write-path queries
    assert m["retrieval"]["cost"]["qpm"] == 0.0
    page = (out / "report.html").read_text()
    assert "<svg" in page and "retrieval" in page


def test_limits_users_and_sessions(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run = HaluMemRun(data=FIX, out=out, systems=["recent"], users=1, sessions=1)
    run_halumem(run, llm=make_llm(), embedder=embedder)
    recs = records(out)
    assert {r["user"] for r in recs} == {"tiny-user-1"}
    assert {r.get("session") for r in recs if "session" in r} == {0}


def test_resume_after_a_crash_loses_only_the_item_in_flight(
    tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"]), llm=make_llm(), embedder=embedder
    )
    full = (out / "results.jsonl").read_text().splitlines()
    # simulate a crash: keep the first half and a torn line
    half = full[: len(full) // 2]
    (out / "results.jsonl").write_text("\n".join(half) + "\n" + full[len(half)][:20])
    llm = make_llm()
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], resume=True), llm=llm, embedder=embedder
    )
    again = records(out)
    assert sorted(r["key"] for r in again) == sorted(json.loads(x)["key"] for x in full)
    # applied sessions were not re-extracted: only the missing answers used the LLM
    asked = [r for r in llm.requests if r["schema"] is None]
    assert len(llm.requests) == len(asked)
    # a second resume has nothing left to do
    llm2 = make_llm()
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], resume=True),
        llm=llm2,
        embedder=embedder,
    )
    assert llm2.requests == [] and len(records(out)) == len(full)


def test_failed_session_is_logged_and_the_run_goes_on(tmp_path: Path, embedder: Embedder) -> None:
    from deltamem.llm.base import LLMError

    def reply(messages: list[ChatMessage]) -> Any:
        if messages[0]["content"] != ANSWER_SYSTEM:
            raise LLMError("model down")
        return "unknown"

    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem"], users=1),
        llm=ScriptedLLM(default=reply, retries=0),
        embedder=embedder,
    )
    sess = [r for r in records(out) if r["kind"] == "session" and not r["filler"]]
    assert sess and all(r["error"] and r["memories"] == [] for r in sess)
    assert json.loads((out / "metrics.json").read_text())["deltamem"]["retrieval"]["errors"] > 0


def test_resume_with_more_sessions_continues_the_user(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["recent"], users=1, sessions=1),
        llm=make_llm(),
        embedder=embedder,
    )
    first = {r["key"] for r in records(out)}
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["recent"], users=1, resume=True),
        llm=make_llm(),
        embedder=embedder,
    )
    recs = records(out)
    assert first <= {r["key"] for r in recs}
    assert {r["session"] for r in recs if r["kind"] == "question"} == {0, 2}
    # the resumed system was rebuilt from earlier sessions: session 0's turns are visible
    q = next(r for r in recs if r["kind"] == "question" and r["session"] == 2)
    assert any("Pixel" in t for t in q["retrieved"])
    # each hit is logged whole, so the question can be answered again from the log
    hits = [Retrieved.from_record(h) for h in q["hits"]]
    assert [h.text for h in hits] == q["retrieved"] and q["asked_at"]
    assert all(h.kind == "episode" and h.timestamp is not None for h in hits)


def test_facts_system_reads_the_bank_deltamem_filled(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "run"
    llm = make_llm()
    run = HaluMemRun(data=FIX, out=out, systems=["deltamem", "deltamem-facts"], answer=False)
    run_halumem(run, llm=llm, embedder=embedder)
    sess = [r for r in records(out) if r["kind"] == "session" and not r["filler"]]
    by = {s: [r for r in sess if r["system"] == s] for s in ("deltamem", "deltamem-facts")}
    assert len(by["deltamem"]) == len(by["deltamem-facts"]) > 0
    # same writes, paid once: the facts system replayed every session from the log
    assert [r["memories"] for r in by["deltamem"]] == [r["memories"] for r in by["deltamem-facts"]]
    assert any(r["memories"] for r in by["deltamem"])
    assert all(r["cost"]["llm_calls"] == 0 for r in by["deltamem-facts"])
    assert any(r["cost"]["llm_calls"] > 0 for r in by["deltamem"])
