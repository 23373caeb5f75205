"""Benchmark loaders: on the real dev files (skipped when absent) and on fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.bench.datasets import halumem, locomo, longmemeval, membench, personamem
from deltamem.memory import parse_messages

FIX = Path(__file__).parent / "fixtures"
DATA = Path(__file__).parent.parent.parent / "shared" / "data"
HALUMEM_DEV = DATA / "halumem" / "pilot_slice_user0.jsonl"
LOCOMO_DEV = DATA / "locomo" / "locomo10-dev.json"


def test_halumem_fixture() -> None:
    users = list(halumem.iter_users(FIX / "halumem_tiny.jsonl"))
    assert [u.uuid for u in users] == ["tiny-user-1", "tiny-user-2"]  # blank line skipped
    u = users[0]
    assert u.name == "Dana Reyes"
    s0, filler, s2 = u.sessions
    assert filler.is_generated_qa_session and not filler.evaluated and filler.questions == []
    assert [p.is_distractor for p in s0.memory_points] == [False, False, True]
    assert not any(p.is_update_target for p in s0.memory_points)
    assert s2.memory_points[0].is_update_target
    bs = halumem.to_bench_session(s0, 0)
    assert bs.session_id == "s000" and bs.turn_ids == ["0", "0", "1", "1"]
    assert [m["role"] for m in bs.messages] == ["user", "assistant", "user", "assistant"]
    assert bs.timestamp is not None and bs.timestamp.year == 2031
    parse_messages(bs.messages)  # deltamem accepts them as they are
    assert all("name" not in m for m in bs.messages)
    named = halumem.to_bench_session(s0, 0, u.name)
    # the account's name goes with the user's words only: facts name the person
    assert [m.get("name") for m in named.messages] == ["Dana Reyes", None, "Dana Reyes", None]
    assert parse_messages(named.messages)[0].name == "Dana Reyes"
    limited = halumem.iter_users(FIX / "halumem_tiny.jsonl", limit=1)
    assert [u.uuid for u in limited] == ["tiny-user-1"]


def test_halumem_is_update_accepts_booleans_and_missing_questions() -> None:
    p = halumem.MemoryPoint(memory_content="x", is_update=True, original_memories=["y"])
    assert p.is_update == "True" and p.is_update_target
    q = halumem.MemoryPoint(memory_content="x", is_update="True", original_memories=[])
    assert not q.is_update_target  # nothing to update: routed to integrity
    s = halumem.Session.model_validate({"dialogue": [], "questions": None})
    assert s.questions == [] and s.memory_points == []


@pytest.mark.skipif(not HALUMEM_DEV.exists(), reason="HaluMem dev data not present")
def test_halumem_real_dev_file() -> None:
    (u,) = list(halumem.iter_users(HALUMEM_DEV))
    assert u.name == "Martin Mark" and len(u.sessions) == 29
    assert sum(len(s.questions) for s in u.sessions) == 67
    points = [p for s in u.sessions for p in s.memory_points]
    assert {p.memory_source for p in points} <= {"primary", "secondary", "interference", "system"}
    assert any(p.is_distractor for p in points) and any(p.is_update_target for p in points)
    bs = halumem.to_bench_session(u.sessions[0], 0)
    assert len(bs.messages) == len(bs.turn_ids) == len(u.sessions[0].dialogue)
    parse_messages(bs.messages)


def test_locomo_role_mapping_and_ids(tmp_path: Path) -> None:
    raw = [
        {
            "sample_id": "c1",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_2_date_time": "3:00 pm on 9 May, 2023",
                "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Back from Rome!"}],
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob"},
                    {
                        "speaker": "Bob",
                        "dia_id": "D1:2",
                        "text": "Look",
                        "blip_caption": "a photo of a dog",
                    },
                ],
            },
            "qa": [
                {"question": "q?", "answer": 2022, "evidence": ["D1:1; D2:1"], "category": 2},
                {"question": "r?", "evidence": ["D1:2"], "category": 5, "adversarial_answer": "no"},
            ],
        }
    ]
    path = tmp_path / "l.json"
    import json

    path.write_text(json.dumps(raw))
    (c,) = locomo.load(path)
    assert [s.index for s in c.sessions] == [1, 2]
    bs = locomo.to_bench_session(c, c.sessions[0])
    assert [(m["role"], m["name"]) for m in bs.messages] == [("user", "Ann"), ("assistant", "Bob")]
    assert bs.messages[1]["content"] == "Look [shares a photo: a photo of a dog]"
    assert bs.turn_ids == ["D1:1", "D1:2"] and bs.timestamp.day == 8
    both = locomo.to_bench_session(c, c.sessions[0], both_as_user=True)
    assert [(m["role"], m["name"]) for m in both.messages] == [("user", "Ann"), ("user", "Bob")]
    assert c.qa[0].answer == "2022" and c.qa[0].evidence == ["D1:1", "D2:1"]
    assert c.qa[1].answer is None and c.qa[1].category_name == "adversarial"


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="LoCoMo dev data not present")
def test_locomo_real_dev_file() -> None:
    convs = locomo.load(LOCOMO_DEV)
    assert [c.sample_id for c in convs] == ["conv-26", "conv-30"]
    c = convs[0]
    assert c.sessions[0].index == 1 and c.qa and {q.category for q in c.qa} <= {1, 2, 3, 4, 5}
    for s in c.sessions:
        bs = locomo.to_bench_session(c, s)
        assert len(bs.messages) == len(bs.turn_ids)
        parse_messages(bs.messages)
    assert all(q.answer is not None for q in c.qa if q.category != 5)


def test_membench_fixture() -> None:
    trajs = list(membench.iter_trajectories(FIX / "membench_tiny.json"))
    assert [(t.qa_type, t.scenario, t.tid) for t in trajs] == [
        ("simple", "roles", 0),
        ("simple", "events", 1),
        ("simple", "items", 2),
        ("highlevel", "movie", 0),
    ]
    t = trajs[0]
    assert t.steps[0].participation and not t.steps[1].participation
    s0, s1 = t.step_session(0), t.step_session(1)
    assert [m["role"] for m in s0.messages] == ["user", "assistant"]
    assert s1.messages[0]["content"].startswith("Ana sent") and s1.turn_ids == ["1"]
    assert t.qa.ground_truth == "B" and t.qa.target_step_id == [0]
    assert trajs[1].qa.target_step_id == [1] and len(trajs[1].steps) == 2
    assert trajs[1].step_session(0).timestamp is None


def test_longmemeval_fixture() -> None:
    a, b, *_ = longmemeval.load(FIX / "longmemeval_tiny.json")
    assert not a.abstention and b.abstention
    ss = a.sessions()
    assert [s.session_id for s in ss] == ["sess_a", "sess_b"]
    assert ss[0].turn_ids == ["sess_a:0", "sess_a:1"] and ss[0].timestamp.day == 20
    assert [s.session_id for s in b.sessions()] == ["h0"]


def test_personamem_fixture() -> None:
    q, *_ = personamem.load_questions(FIX / "personamem_questions.csv")
    ctx = personamem.load_contexts(FIX / "personamem_contexts.jsonl")
    assert q.correct_letter == "b" and len(q.all_options) == 4
    s = personamem.context_session(q, ctx)
    assert [m["content"] for m in s.messages] == [
        "I took up ceramics this spring.",
        "How lovely.",
        "I love shaping bowls.",
    ]
    assert s.turn_ids == ["1", "2", "3"]
