"""The GRPO reward's own rules (deltamem/train/reward_rules.py): each named check on
hand-written facts, and the config that enables them."""

from __future__ import annotations

import pytest

from deltamem.train.reward_rules import RULES, FactContext, RewardRules

TURN = FactContext(
    subject="Dana Reyes",
    said="I just started a job as a nurse at a clinic in Leeds.",
    before="Any news from work?",
)


@pytest.mark.parametrize(
    ("fact", "failed"),
    [
        ("Dana Reyes works as a nurse at a clinic in Leeds.", []),
        ("Dana's new job is at a clinic in Leeds.", []),  # the name, possessive
        ("Reyes started a job at a clinic.", []),  # a word of the name is enough
        ("I work as a nurse in Leeds.", ["third_person", "names_person"]),
        ("Dana Reyes said my clinic is in Leeds.", ["third_person"]),
        ("Dana Reyes told you about her job at a clinic.", ["third_person"]),
        ("She works as a nurse at a clinic in Leeds.", ["names_person"]),
        ("Dana Reyes owns a yacht in Monaco.", ["grounded"]),
        ("Dana Reyes.", ["grounded"]),  # nothing past the name
        ("Dana Reyes has news from work.", []),  # the assistant's words are the turn's
        ("Dana Reyes moved to the US for a clinic job.", []),  # "US" is no "us"
        (
            "Dana Reyes just started a job as a nurse at a clinic in Leeds, " * 3,
            ["not_too_long"],
        ),
    ],
)
def test_each_rule_on_hand_written_facts(fact: str, failed: list[str]) -> None:
    assert RewardRules().failed(fact, TURN) == failed


def test_the_unnamed_person_is_named_as_the_user() -> None:
    ctx = FactContext(subject="The user", said="I work night shifts at the clinic.")
    assert RewardRules().failed("The user works night shifts at a clinic.", ctx) == []
    assert RewardRules().failed("Works night shifts at a clinic.", ctx) == ["names_person"]


def test_the_config_names_the_rules_and_their_numbers() -> None:
    rules = RewardRules(enabled=("grounded", "not_too_long"), grounded_share=0.9, max_words=5)
    assert rules.failed("Dana Reyes loves her job as a nurse at a clinic in Leeds.", TURN) == [
        "grounded",  # "loves" is not the turn's: 4 of 5 words
        "not_too_long",
    ]
    assert rules.as_dict() == {
        "enabled": ["grounded", "not_too_long"],
        "grounded_share": 0.9,
        "max_words": 5,
        "max_facts": 6,
    }
    assert set(RewardRules().enabled) == set(RULES)
    with pytest.raises(ValueError, match="unknown reward rules"):
        RewardRules(enabled=("said_of_another",))
