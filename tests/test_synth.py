"""`deltamem synth`: a scripted model (synth_world.py) drives whole runs; each kind
of bad generation is refused (or pruned) by the checks, regenerated, and dropped
with its reason when it stays bad; runs resume; the output is HaluMem data the
bench reads and training records as `deltamem train records` writes them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from synth_world import (
    ANCHOR_1,
    ANCHOR_2,
    ASTHMA,
    CAREER,
    SENIOR,
    SISTER,
    SynthWorld,
    took_up,
)
from typer.testing import CliRunner

from deltamem.bench.datasets import halumem as ds
from deltamem.bench.halumem import HaluMemRun, run_halumem
from deltamem.embed import Embedder
from deltamem.train.records import records_from_halumem
from deltamem.train.synth import SynthConfig, SynthError, synthesize
from deltamem.train.synth.checks import Refused, Required, check_dialogue, check_ops
from deltamem.train.synth.schemas import DialogueReply, OpsReply

D1, D2, D3 = dt.date(2027, 3, 31), dt.date(2027, 4, 30), dt.date(2027, 5, 30)
CALMER_1 = "Ada Byron felt calmer after a chess evening."
CALMER_2 = "Ada Byron felt calmer after a bouldering evening."
SEED = ["A data analyst who runs to clear her head."]


def config(**kw: Any) -> SynthConfig:
    return SynthConfig(**{"events": 3, "batch": 2, "dialogue": "whole", **kw})


def run(out: Path, world: SynthWorld | None = None, **kw: Any) -> tuple[dict, SynthWorld]:
    world = world or SynthWorld()
    resume = kw.pop("resume", False)
    report = synthesize(world, SEED, out, config(**kw), resume=resume)
    return report, world


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def refusals(out: Path, kind: str = "refused") -> list[dict[str, Any]]:
    path = out / "refusals.jsonl"
    return [r for r in lines(path) if r["kind"] == kind] if path.exists() else []


# --- a whole run ------------------------------------------------------------------------------
def test_full_run_writes_hand_checked_sessions_and_records(tmp_path: Path) -> None:
    report, world = run(tmp_path)
    # profile, 2 event batches, anchor; ops for 3 events; dialogue and questions for 4 sessions
    assert world.calls.count("events") == 2 and world.calls.count("ops") == 3
    assert len(world.calls) == 1 + 2 + 1 + 3 + 4 + 4
    assert report["sessions"] == {"planned": 4, "kept": 4, "dropped": 0}
    assert report["generations"] == {"accepted": 15, "refused": 0, "acceptance_rate": 1.0}
    assert report["drops"] == [] and report["records"] == 4

    (user,) = lines(tmp_path / "halumem.jsonl")
    assert user["persona_info"].startswith("Name: Ada Byron; Gender: female; Current Age: 36")
    intro, first, second, third = user["sessions"]
    assert [p["memory_content"] for p in intro["memory_points"]] == [CAREER, ASTHMA, SISTER]
    assert intro["start_time"] == "Mar 01, 2027, 10:00:00"
    assert first["start_time"] == "Mar 31, 2027, 10:00:00"
    assert first["end_time"] == "Mar 31, 2027, 10:06:00"  # 3 turns, 2 minutes each
    points = {p["memory_content"]: p for p in first["memory_points"]}
    assert points[SENIOR]["is_update"] == "True"
    assert points[SENIOR]["original_memories"] == [CAREER]
    assert points[ANCHOR_1]["memory_type"] == "Event Memory"
    assert points["Ada Byron is training for the Berlin marathon."]["memory_source"] == (
        "interference"
    )
    assert ASTHMA not in points  # a `none` operation is no gold point
    # the anchor memory evolves: event 2 updates the version event 1 added
    anchor = next(p for p in second["memory_points"] if p["memory_content"] == ANCHOR_2)
    assert anchor["original_memories"] == [ANCHOR_1]
    # the fact -> turn map: each fact said by the user in the turn it names
    for cov in first["synth"]["coverage"]:
        user_turn = first["dialogue"][2 * (cov["turn"] - 1)]
        assert user_turn["role"] == "user" and cov["memory"] in user_turn["content"]
    (d,) = first["synth"]["distractors"]
    assert "Berlin" in first["dialogue"][2 * (d["turn"] - 1) + 1]["content"]
    assert {q["question_type"] for q in first["questions"]} == {
        "Basic Fact Recall",
        "Memory Boundary",
    }
    assert third["synth"]["title"] == f"Week of {D3:%d %B}"

    recs = lines(tmp_path / "records.jsonl")
    assert [r["session_id"] for r in recs] == ["s000", "s001", "s002", "s003"]
    assert recs[0]["state_before"] == [] and recs[0]["state_after"] == [CAREER, ASTHMA, SISTER]
    assert recs[1]["state_before"] == [CAREER, ASTHMA, SISTER]
    assert recs[1]["state_after"] == [ASTHMA, SISTER, SENIOR, CALMER_1, ANCHOR_1]
    assert [(o["op"], o["replaces"]) for o in recs[1]["ops"]] == [
        ("update", CAREER),
        ("add", None),
        ("none", None),
        ("add", None),
    ]
    assert recs[1]["ops"][0]["keywords"] == ["senior", "Northwind Bank"]
    assert recs[2]["state_after"] == [
        ASTHMA,
        SISTER,
        SENIOR,
        CALMER_1,
        took_up(D2),
        CALMER_2,
        ANCHOR_2,
    ]
    assert recs[1]["messages"][0]["name"] == "Ada Byron"
    assert recs[1]["messages"][0]["timestamp"].startswith("2027-03-31T10:00")


def test_output_loads_through_the_halumem_reader_and_the_bench(tmp_path: Path) -> None:
    run(tmp_path)
    (user,) = list(ds.iter_users(tmp_path / "halumem.jsonl"))
    assert user.name == "Ada Byron" and len(user.sessions) == 4
    bench = ds.to_bench_session(user.sessions[1], 1, user.name)
    assert bench.session_id == "s001" and len(bench.messages) == 6
    assert bench.turn_ids == ["0", "0", "1", "1", "2", "2"]
    updates = [p for p in user.sessions[1].memory_points if p.is_update_target]
    assert [p.memory_content for p in updates] == [SENIOR]
    assert [p.is_distractor for p in user.sessions[1].memory_points].count(True) == 1
    # the records `deltamem train records` builds from the file carry the same states
    ours = lines(tmp_path / "records.jsonl")
    theirs = list(records_from_halumem(tmp_path / "halumem.jsonl"))
    assert [r.state_after for r in theirs] == [r["state_after"] for r in ours]
    assert [r.messages for r in theirs] == [r["messages"] for r in ours]


def test_bench_halumem_runs_on_the_output(tmp_path: Path, embedder: Embedder) -> None:
    run(tmp_path / "synth")
    bench = HaluMemRun(
        data=tmp_path / "synth" / "halumem.jsonl",
        out=tmp_path / "bench",
        systems=["recent"],
        answer=False,
    )
    metrics = run_halumem(bench, llm=ScriptedLLM(), embedder=embedder)
    assert "recent" in metrics
    results = lines(tmp_path / "bench" / "results.jsonl")
    assert sum(r.get("kind") == "session" for r in results) == 4


# --- each kind of bad generation ------------------------------------------------------------
def _refused_once(out: Path, report: dict, step: str, needle: str) -> None:
    (row,) = refusals(out)
    assert row["step"].split(":")[0] == step and needle in row["reason"], row
    assert report["by_step"][step]["refused"] == 1
    assert report["sessions"]["kept"] == 4  # regenerated, then kept
    assert report["generations"]["acceptance_rate"] == round(15 / 16, 4)


def test_a_paragraph_fact_and_a_keyword_in_another_form_are_mended_not_refused(
    tmp_path: Path,
) -> None:
    """What a 1.5B model writes at the profile step: one paragraph per area, with a
    sentence that carries no keyword, and a keyword in another form than its text."""

    def paragraph(good: dict) -> dict:
        good["facts"][0]["content"] = CAREER + " Her team is small and friendly."
        good["facts"][1]["keywords"] = ["asthma", "inhalers", "running"]
        return good

    world = SynthWorld()
    world.bad["profile"] = [paragraph]
    report, _ = run(tmp_path, world)
    assert report["generations"]["refused"] == 0 and report["sessions"]["kept"] == 4
    (user,) = lines(tmp_path / "halumem.jsonl")
    intro = user["sessions"][0]["memory_points"]
    # the sentence without two keywords is dropped, not given any
    assert [p["memory_content"] for p in intro] == [CAREER, ASTHMA, SISTER]
    recs = lines(tmp_path / "records.jsonl")
    assert recs[0]["ops"][1]["keywords"] == ["asthma", "inhaler", "running"]


def test_split_fact_keeps_each_sentence_with_its_own_keywords() -> None:
    from deltamem.train.synth.repair import keyword_as_written, split_fact
    from deltamem.train.synth.schemas import Fact

    fact = Fact(
        area="health",
        content="Emily is managing her health. She takes regular exercise and follows a "
        "healthy eating plan. She is also taking medication prescribed by her doctor.",
        keywords=["regular exercise", "healthy eating plan", "medication", "doctor"],
    )
    assert [(f.content, f.keywords) for f in split_fact(fact)] == [
        (
            "Emily takes regular exercise and follows a healthy eating plan.",
            ["regular exercise", "healthy eating plan"],
        ),
        ("Emily is also taking medication prescribed by her doctor.", ["medication", "doctor"]),
    ]
    # no sentence with two keywords: the fact comes back whole, for the checks
    lone = Fact(area="career", content="Emily is a nurse. She likes it.", keywords=["nurse", "x"])
    assert split_fact(lone) == [lone]
    assert keyword_as_written("cooking", "Emily likes to cook Thai food") == "cook"
    assert keyword_as_written("chemistry teacher", "a teacher of chemistry") == "chemistry teacher"
    assert keyword_as_written("baking", "Emily likes to cook") == "baking"


def test_the_persons_name_is_dropped_from_keywords_where_others_are_left() -> None:
    from deltamem.train.synth.repair import keywords_as_written

    text = "Emily Johnson ran her first half marathon in Boston."
    assert keywords_as_written(["Emily", "half marathon", "Boston"], text, "Emily") == [
        "half marathon",
        "Boston",
    ]
    # too few others: left as it is, for the check to refuse
    assert keywords_as_written(["Emily", "Boston"], text, "Emily") == ["Emily", "Boston"]


def test_bad_json_shape_is_refused_and_regenerated(tmp_path: Path) -> None:
    world = SynthWorld()
    world.bad["profile"] = [lambda good: {"profile": "Ada", "facts": good["facts"]}]
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "profile", "bad JSON shape")


def test_a_reply_that_is_not_json_is_refused(tmp_path: Path) -> None:
    world = SynthWorld()
    world.bad["anchor"] = [lambda good: "Here is the memory thread you asked for."]
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "anchor", "did not return a JSON object")


def test_events_out_of_order_are_refused(tmp_path: Path) -> None:
    def swap(good: dict) -> dict:
        a, b = good["events"]
        a["date"], b["date"] = b["date"], a["date"]
        return good

    world = SynthWorld()
    world.bad["events"] = [swap]
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "events", "events must be chronological")


def test_a_fact_missing_from_the_user_turn_the_map_names_is_refused(tmp_path: Path) -> None:
    def misplace(good: dict) -> dict:
        good["facts"][0]["turn"] = 2  # F1 is said in turn 1
        return good

    world = SynthWorld()
    world.bad["dialogue"] = [misplace]
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "dialogue", "not in the user's utterance of turn 2")


def test_a_fact_the_assistant_says_first_is_refused(tmp_path: Path) -> None:
    def assistant_first(good: dict) -> dict:
        turns = good["turns"]
        turns[0]["user"] = turns[0]["user"].replace(SENIOR, "").strip() or "Hello."
        turns[0]["assistant"] += " I hear you are a senior analyst now."
        turns[1]["user"] += " " + SENIOR
        good["facts"][0]["turn"] = 2
        return good

    world = SynthWorld()
    world.bad["dialogue"] = [lambda good: good, assistant_first]  # the first event's dialogue
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "dialogue", "the assistant says 'senior' in turn 1")


def test_an_update_quoting_a_fact_not_in_the_state_is_refused(tmp_path: Path) -> None:
    def misquote(good: dict) -> dict:
        good["operations"][0]["replaces"] = "Ada Byron works at a bakery in Paris."
        return good

    world = SynthWorld()
    world.bad["ops"] = [misquote]
    report, _ = run(tmp_path, world)
    _refused_once(tmp_path, report, "ops", "which is not in the current state")


def test_parts_that_can_go_alone_are_pruned_with_their_reason(tmp_path: Path) -> None:
    def misquote_change(good: dict) -> dict:
        good["events"][0]["changes"][0]["before"] = "Ada Byron is a dentist."
        return good

    def user_confirms(good: dict) -> dict:
        good["turns"][0]["user"] += " Yes, Berlin is the plan."
        return good

    def bad_evidence(good: dict) -> dict:
        good["questions"][0]["evidence"] = ["Ada Byron owns a boat."]
        return good

    world = SynthWorld()
    world.bad.update(
        events=[misquote_change],
        dialogue=[lambda good: good, user_confirms],
        questions=[bad_evidence],
    )
    report, _ = run(tmp_path, world)
    pruned = {r["step"]: r["reason"] for r in refusals(tmp_path, "pruned")}
    assert len(pruned) == 3
    assert "quotes 'Ada Byron is a dentist.', which is not in the state" in pruned["events:0"]
    assert "D1: the user says 'Berlin'" in pruned["dialogue:1"]
    assert "evidence 'Ada Byron owns a boat.' is no memory" in pruned["questions:0"]
    assert refusals(tmp_path) == [] and report["sessions"]["kept"] == 4
    (user,) = lines(tmp_path / "halumem.jsonl")
    first = user["sessions"][1]
    assert all(p["memory_source"] != "interference" for p in first["memory_points"])
    assert len(user["sessions"][0]["questions"]) == 1
    # the event kept without its change: no update, and the career fact still stands
    assert all(p["is_update"] == "False" for p in first["memory_points"])


def test_a_step_that_stays_bad_is_dropped_with_its_reason(tmp_path: Path) -> None:
    def misplace(good: dict) -> dict:
        good["facts"][0]["turn"] = 2
        return good

    world = SynthWorld()
    world.bad["dialogue"] = [lambda good: good, misplace, misplace, misplace]
    report, world = run(tmp_path, world)
    assert report["sessions"] == {"planned": 4, "kept": 3, "dropped": 1}
    (drop,) = report["drops"]
    assert drop["step"] == "dialogue:1" and drop["reason"].startswith("refused 3 time(s); last:")
    assert len(refusals(tmp_path)) == 3 and len(refusals(tmp_path, "dropped")) == 1
    assert report["by_step"]["dialogue"] == {
        "accepted": 3,
        "refused": 3,
        "dropped": 1,
        "pruned": 0,
    }
    # the state moves on only through kept sessions: event 2 sees the old career fact,
    # and the anchor memory, never stored, is added afresh
    recs = lines(tmp_path / "records.jsonl")
    assert len(recs) == 3 and recs[1]["state_before"] == [CAREER, ASTHMA, SISTER]
    assert ("add", ANCHOR_2) in [(o["op"], o["content"]) for o in recs[1]["ops"]]
    ops_prompt = [p for s, p in zip(world.calls, world.prompts, strict=True) if s == "ops"][1]
    assert CAREER in ops_prompt and SENIOR not in ops_prompt


# --- resume and cache -------------------------------------------------------------------------
def test_resume_after_a_crash_asks_only_what_is_missing(tmp_path: Path) -> None:
    whole, _ = run(tmp_path / "whole")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", SynthWorld(fail_after=7))
    with pytest.raises(SynthError, match="--resume"):
        run(tmp_path / "cut")
    report, world = run(tmp_path / "cut", resume=True)
    assert len(world.calls) == 15 - 7
    assert world.calls[0] == "dialogue"  # the profile, events, anchor and first ops are cached
    for name in ("halumem.jsonl", "records.jsonl"):
        assert (tmp_path / "cut" / name).read_text() == (tmp_path / "whole" / name).read_text()
    assert report["generations"] == whole["generations"]
    again, world = run(tmp_path / "cut", resume=True)
    assert world.calls == [] and again["sessions"] == whole["sessions"]


def test_a_torn_cache_line_is_generated_again(tmp_path: Path) -> None:
    run(tmp_path)
    (cache,) = (tmp_path / "cache").iterdir()
    text = cache.read_text()
    cache.write_text(text[: len(text) - 40])  # the last step's line cut short
    _, world = run(tmp_path, resume=True)
    assert world.calls == ["questions"]


# --- the command --------------------------------------------------------------------------------
def test_synth_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deltamem.cli.main import app

    worlds: list[SynthWorld] = []

    def make_llm(spec: Any = None, **_: Any) -> SynthWorld:
        worlds.append(SynthWorld())
        return worlds[-1]

    monkeypatch.setattr("deltamem.llm.make_llm", make_llm)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# seeds\n" + SEED[0] + "\n")
    out = tmp_path / "out"
    args = ["synth", "--personas", "2", "--events", "2", "--out", str(out), "--seeds", str(seeds)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "6 of 6 sessions kept" in result.output
    users = list(ds.iter_users(out / "halumem.jsonl"))
    assert [u.uuid.split("-")[1] for u in users] == ["000", "001"]  # the seed used twice
    assert (out / "llm_calls.jsonl").exists() and (out / "report.json").exists()
    assert CliRunner().invoke(app, args).exit_code == 2  # OUT holds a run: --resume or not
    result = CliRunner().invoke(app, [*args, "--resume"])
    assert result.exit_code == 0 and worlds[-1].calls == []


# --- the checks on their own ------------------------------------------------------------------
def test_checks_allow_the_assistant_to_recall_a_known_fact_first() -> None:
    reply = DialogueReply.model_validate(
        {
            "turns": [
                {"user": "Work is busy.", "assistant": "Is the asthma better?"},
                {"user": "The asthma is fine, the inhaler helps.", "assistant": "Good."},
                {"user": "Bye.", "assistant": "Bye."},
            ],
            "facts": [{"id": "F1", "turn": 2}],
        }
    )
    fact = Required("F1", ASTHMA, ("asthma", "inhaler"), "none")
    coverage, placed, pruned = check_dialogue(
        reply, facts=[fact], distractors=[], known=[ASTHMA], turns=(3, 7)
    )
    assert coverage == {"F1": 2} and placed == {} and pruned == []
    with pytest.raises(Refused, match="has 3 turns; asked for 4-8"):
        check_dialogue(reply, facts=[fact], distractors=[], known=[ASTHMA], turns=(4, 8))


def test_check_ops_returns_the_states_own_quote() -> None:
    reply = OpsReply.model_validate(
        {
            "operations": [
                {
                    "op": "update",
                    "memory": SENIOR,
                    "replaces": "  ada byron works as a data analyst at Northwind Bank in Leeds",
                    "keywords": ["senior", "Leeds"],
                },
            ]
        }
    )
    checked, pruned = check_ops(reply, state=[CAREER], first_name="Ada")
    assert checked.operations[0].replaces == CAREER and pruned == []
    reply.operations[0].keywords = ["senior", "Manchester"]
    with pytest.raises(Refused, match="'Manchester' not in its text"):
        check_ops(reply, state=[CAREER], first_name="Ada")
    reply.operations[0].keywords = ["Ada Byron", "senior"]
    with pytest.raises(Refused, match="a keyword is the person's name"):
        check_ops(reply, state=[CAREER], first_name="Ada")


# --- the dialogue written a fact at a time (the default, for small models) -------------------
def test_a_dialogue_written_a_fact_at_a_time_passes_the_same_checks(tmp_path: Path) -> None:
    run(tmp_path / "whole")
    report, world = run(tmp_path / "turns", dialogue="turns")
    assert "dialogue" not in world.calls
    # one call per fact: 3 initial facts, then per event its operations (and the anchor)
    assert report["sessions"] == {"planned": 4, "kept": 4, "dropped": 0}
    assert report["by_step"]["turn"]["accepted"] == world.calls.count("turn") >= 4 * 3
    (user,) = lines(tmp_path / "turns" / "halumem.jsonl")
    first = user["sessions"][1]
    for cov in first["synth"]["coverage"]:
        user_turn = first["dialogue"][2 * (cov["turn"] - 1)]
        assert user_turn["role"] == "user" and cov["memory"] in user_turn["content"]
    (d,) = first["synth"]["distractors"]
    assert d["turn"] == 1 and "Berlin" in first["dialogue"][1]["content"]
    # the labels do not depend on how the dialogue was written
    ours = [r["state_after"] for r in lines(tmp_path / "turns" / "records.jsonl")]
    assert ours == [r["state_after"] for r in lines(tmp_path / "whole" / "records.jsonl")]
    # the second exchange is written after the first, which its prompt shows
    second = [p for s, p in zip(world.calls, world.prompts, strict=True) if s == "turn"][1]
    assert "The conversation so far" in second and CAREER in second


def test_an_exchange_without_its_facts_keywords_is_refused_and_regenerated(
    tmp_path: Path,
) -> None:
    world = SynthWorld()
    world.bad["turn"] = [lambda good: {"user": "Hello there.", "assistant": good["assistant"]}]
    report, _ = run(tmp_path, world, dialogue="turns")
    (row,) = refusals(tmp_path)
    assert row["step"] == "turn:0:1" and "not in the user's message" in row["reason"]
    assert report["sessions"]["kept"] == 4 and report["by_step"]["turn"]["refused"] == 1


def test_check_turn_refuses_an_assistant_that_says_a_later_fact_first() -> None:
    from deltamem.train.synth.checks import check_turn
    from deltamem.train.synth.schemas import DialogueTurn

    fact = Required("F1", CAREER, ("data analyst", "Northwind Bank"), "add")
    turn = DialogueTurn(
        user="I work as a data analyst at Northwind Bank.", assistant="And your sister Clara?"
    )
    check_turn(turn, fact=fact, later=["piano"])
    with pytest.raises(Refused, match="the assistant says 'Clara'"):
        check_turn(turn, fact=fact, later=["Clara", "piano"])
    with pytest.raises(Refused, match="empty utterance"):
        check_turn(DialogueTurn(user="x", assistant=" "), fact=fact, later=[])
    # the fact copied as it is written: the user speaks of themselves in the third person
    echo = DialogueTurn(
        user="I work as a data analyst at Northwind Bank.",
        assistant="It listens, asks or encourages, and adds nothing about Ada's life.",
    )
    with pytest.raises(Refused, match="copies the prompt's rules"):
        check_turn(echo, fact=fact, later=[])
    copied = DialogueTurn(user=CAREER, assistant="Good to know.")
    with pytest.raises(Refused, match="not in the first person"):
        check_turn(copied, fact=fact, later=[])


def test_speaker_labels_in_an_exchange_are_mended() -> None:
    from deltamem.train.synth.repair import mend_turn
    from deltamem.train.synth.schemas import DialogueTurn

    turn = DialogueTurn(user="Ada Byron: I work nights.", assistant="Assistant: How is it?")
    assert mend_turn(turn, "Ada Byron") == DialogueTurn(
        user="I work nights.", assistant="How is it?"
    )
    plain = DialogueTurn(user="I said: no.", assistant="Fine.")
    assert mend_turn(plain, "Ada Byron") == plain


def test_a_paragraph_anchor_memory_is_cut_to_its_sentence_with_the_keywords() -> None:
    from deltamem.train.synth.repair import mend_anchor
    from deltamem.train.synth.schemas import AnchorReply

    paragraph = (
        "Emily Johnson starts marathon training and is excited about it. She follows her "
        "usual routine. She is grateful for her health and her new routine."
    )
    reply = AnchorReply.model_validate(
        {
            "method": "meaning",
            "thread": [
                {"event": 1, "memory": paragraph, "keywords": ["grateful", "health", "x"]},
                {"event": 2, "memory": ANCHOR_2, "keywords": ["unsure", "turning point"]},
            ],
        }
    )
    first, second = mend_anchor(reply, "Emily").thread
    assert first.memory == "Emily Johnson is grateful for her health and her new routine."
    assert first.keywords == ["grateful", "health"]
    assert (second.memory, second.keywords) == (ANCHOR_2, ["unsure", "turning point"])


def test_placeholder_operations_are_dropped_and_an_update_quoting_nothing_is_an_add(
    tmp_path: Path,
) -> None:
    """What the 1.5B model writes at the operations step: the example's "..." kept as
    an operation, and an update with an empty quote."""

    def copied_example(good: dict) -> dict:
        good["operations"].insert(
            0, {"op": "update", "type": "event", "memory": "...", "replaces": "", "keywords": []}
        )
        good["operations"][-1 if good["operations"][-1]["op"] == "add" else -2]["op"] = "update"
        return good

    world = SynthWorld()
    world.bad["ops"] = [copied_example]
    report, _ = run(tmp_path, world)
    assert refusals(tmp_path) == [] and report["sessions"]["kept"] == 4
    notes = [r["reason"] for r in refusals(tmp_path, "pruned") if r["step"] == "ops:1"]
    assert "operation 1 (update) is the placeholder '...': dropped" in notes
    assert any("quotes no fact: made an add" in n for n in notes)
    first = lines(tmp_path / "records.jsonl")[1]
    assert all(o["content"] != "..." for o in first["ops"])


def test_keywords_the_text_does_not_hold_are_dropped_where_enough_are_left() -> None:
    from deltamem.train.synth.repair import keywords_as_written

    text = "Emily Johnson attends a heart surgery seminar in New York City."
    assert keywords_as_written(["heart surgery", "New York City", "assistant"], text) == [
        "heart surgery",
        "New York City",
    ]
    # too few left: as they were, for the check to refuse
    assert keywords_as_written(["heart surgery", "assistant"], text) == [
        "heart surgery",
        "assistant",
    ]
