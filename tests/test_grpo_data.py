"""GRPO's data and reward without the training stack: one example per user turn of
a record, its prompt exactly what the product's extractor sends, the gold facts
attributed by keywords, and the reward 0.1·format + 0.1·retrieval + 0.8·r_trans on
hand-written completions, its facts checked by the reward's own rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import ScriptedLLM

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.train.grpo import (
    ExtractionReward,
    TurnExample,
    attribute_ops,
    load_records,
    turn_examples,
)
from deltamem.train.records import TrainingOp
from deltamem.train.reward_rules import RewardRules

FIXTURE = Path(__file__).parent / "fixtures" / "halumem_tiny.jsonl"


def test_one_example_per_user_turn_with_the_facts_it_states(records_file: Path) -> None:
    made = turn_examples(load_records(records_file))
    assert made.records == 4 and made.unattributed == 0
    got = [(e.source.split("/")[1], e.said, e.gold) for e in made.examples[:4]]
    assert got == [
        (
            "s000#0",
            "I just started a job as a nurse at a clinic in Leeds.",
            ["Dana Reyes works as a nurse at a clinic in Leeds."],
        ),
        (
            "s000#2",
            "Maybe. My cat Pixel keeps me company after long shifts.",
            ["Dana Reyes has a cat named Pixel."],
        ),
        ("s001#0", "What is the boiling point of water at sea level?", []),
        (
            "s002#0",
            "Big news: I moved and now work as a nurse in York instead of Leeds.",
            ["Dana Reyes works as a nurse in York, having moved from Leeds."],
        ),
    ]
    first = made.examples[1]
    assert first.subject == "Dana Reyes"
    assert first.before.startswith("Congratulations!")  # the assistant turn before it
    assert [m["role"] for m in first.prompt] == ["system", "user"]


def test_an_operation_goes_to_the_turn_with_most_of_its_keywords() -> None:
    op = TrainingOp("add", "Ana Lee moved to Oslo for a job at Equinor", ["ana", "oslo", "equinor"])
    lone = TrainingOp("add", "Ana Lee likes tea", ["ana", "lee"])  # only her name
    turns = {0: "I live in Oslo now.", 2: "Oslo is great, and I work at Equinor!"}
    got, missed = attribute_ops([op, lone], turns, {"ana", "lee"})
    assert got == {0: [], 2: [op]} and missed == 1


def test_prompts_are_exactly_what_the_product_sends(
    records_file: Path, embedder: Embedder, tmp_path: Path
) -> None:
    records = load_records(records_file)
    llm = ScriptedLLM(default={"facts": []})
    memory = Memory(tmp_path / "m.db", llm=llm, embedder=embedder)
    rec = records[0]
    memory.add(rec.messages, user_id="u", session_id="s", timestamp=rec.timestamp)
    sent = [r["messages"] for r in llm.requests]
    made = turn_examples([rec])
    assert sent == [e.prompt for e in made.examples]


def example(said: str, gold: list[str], before: str = "") -> TurnExample:
    return TurnExample(
        prompt=[],
        subject="Dana Reyes",
        said=said,
        before=before,
        gold=gold,
        gold_keywords=[["nurse", "leeds", "clinic"]] * len(gold),
        source="t",
    )


def score(reward: ExtractionReward, completion: str, ex: TurnExample) -> tuple[float, ...]:
    (r,) = reward(
        prompts=[ex.prompt],
        completions=[[{"role": "assistant", "content": completion}]],
        subject=[ex.subject],
        said=[ex.said],
        before=[ex.before],
        gold=[ex.gold],
        gold_keywords=[ex.gold_keywords],
    )
    p = reward.last[0]
    return round(r, 4), p.format, round(p.retrieval, 4), round(p.r_trans, 4)


def test_reward_on_hand_written_completions(embedder: Embedder) -> None:
    reward = ExtractionReward(embedder.embed)
    nurse = example(
        "I just started a job as a nurse at a clinic in Leeds.",
        ["Dana Reyes works as a nurse at a clinic in Leeds."],
        before="Hello! How are you?",
    )
    gold = json.dumps({"facts": ["Dana Reyes works as a nurse at a clinic in Leeds."]})
    assert score(reward, gold, nurse) == (1.0, 1.0, 1.0, 1.0)
    # a near-paraphrase that loses the place: keyword fidelity 2/3, so r_trans 2/3
    lossy = json.dumps({"facts": ["Dana Reyes started a job as a nurse at a clinic."]})
    r, fmt, ret, rt = score(reward, lossy, nurse)
    assert (fmt, ret) == (1.0, 1.0) and rt == pytest.approx(2 / 3, abs=1e-3)
    assert r == pytest.approx(0.2 + 0.8 * 2 / 3, abs=1e-3)
    # one fact the reward's rules refuse (not in the turn): retrieval 1/2, and it is
    # not kept; the completion's parts say which rules scored it and which refused it
    extra = json.dumps(
        {"facts": ["Dana Reyes works as a nurse at a clinic in Leeds.", "Dana Reyes owns a yacht."]}
    )
    assert score(reward, extra, nurse) == (0.95, 1.0, 0.5, 1.0)
    assert reward.last[0].rules == ["third_person", "names_person", "grounded", "not_too_long"]
    assert reward.last[0].refused == {"Dana Reyes owns a yacht.": ["grounded"]}
    # in the person's voice, and not naming them: refused by those rules
    voiced = json.dumps({"facts": ["I work as a nurse at a clinic in Leeds."]})
    assert score(reward, voiced, nurse) == (0.1, 1.0, 0.0, 0.0)
    assert reward.last[0].refused == {
        "I work as a nurse at a clinic in Leeds.": ["third_person", "names_person"]
    }
    # not JSON of the shape asked for: nothing at all
    assert score(reward, "Dana is a nurse.", nurse) == (0.0, 0.0, 0.0, 0.0)
    assert score(reward, '{"memories": []}', nurse) == (0.0, 0.0, 0.0, 0.0)
    # cut off inside the list of strings: the product keeps the finished facts, and
    # so does the reward, but the format is wrong
    cut = '{"facts": ["Dana Reyes works as a nurse at a clinic in Leeds.", "Dana'
    assert score(reward, cut, nurse) == (0.9, 0.0, 1.0, 1.0)
    # cut inside its only fact: nothing finished to keep
    assert score(reward, '{"facts": ["Dana Reyes works as a nu', nurse) == (0.0, 0.0, 0.0, 0.0)
    # words after the object: the product reads the object, but the format is wrong
    assert score(reward, gold + "\nThat is all.", nurse) == (0.9, 0.0, 1.0, 1.0)
    # a turn that states nothing: "no facts" is right
    chat = example("What is the boiling point of water?", [])
    assert score(reward, '{"facts": []}', chat) == (1.0, 1.0, 1.0, 1.0)
    assert score(reward, json.dumps({"facts": ["Dana Reyes asked about water."]}), chat) == (
        0.2,
        1.0,
        1.0,
        0.0,
    )


def test_the_reward_scores_with_the_rules_its_config_enables(embedder: Embedder) -> None:
    """The rule set is the reward's own config: a rule left out scores nothing, and
    the completion's parts name only the rules enabled."""
    nurse = example("I started as a nurse in Leeds.", ["Dana Reyes is a nurse in Leeds."])
    voiced = json.dumps({"facts": ["I am a nurse in Leeds, says Dana Reyes."]})
    every = ExtractionReward(embedder.embed)
    assert score(every, voiced, nurse)[2] == 0.0  # refused: in the first person
    lenient = ExtractionReward(embedder.embed, RewardRules(enabled=("grounded",)))
    assert score(lenient, voiced, nurse)[2] == 1.0
    assert lenient.last[0].rules == ["grounded"] and lenient.last[0].refused == {}
    with pytest.raises(ValueError, match="unknown reward rules"):
        RewardRules(enabled=("check_fact",))


def test_export_finds_the_adapter_and_base_of_a_training_run(tmp_path: Path) -> None:
    from deltamem.train.export import ExportError, resolve_adapter

    run = tmp_path / "run"
    (run / "adapter").mkdir(parents=True)
    (run / "adapter" / "adapter_config.json").write_text("{}")
    (run / "base").mkdir()
    (run / "base" / "config.json").write_text("{}")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    meta = {"model": str(model), "gguf_file": "m.gguf"}
    (run / "deltamem-train.json").write_text(json.dumps(meta))
    assert resolve_adapter(run) == (run / "adapter", model)  # the GGUF it trained on
    assert resolve_adapter(run / "adapter") == (run / "adapter", model)
    model.unlink()  # gone: the config saved beside the adapter
    assert resolve_adapter(run) == (run / "adapter", run / "base")
    assert resolve_adapter(run, tmp_path / "x.gguf") == (run / "adapter", tmp_path / "x.gguf")
    with pytest.raises(ExportError, match="--base"):
        resolve_adapter(tmp_path / "nothing")
