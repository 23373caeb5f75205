"""The model's own confidence in each string it writes (deltamem/llm/confidence.py),
from the llama.cpp decoder's token log-probabilities, and LOW_CONFIDENCE, the fact
rule that reads it (off by default)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import ScriptedLLM

from deltamem.llm import weights
from deltamem.llm.base import Completion
from deltamem.llm.confidence import CONFIDENCE_KEY, json_strings, string_confidence
from deltamem.manager.extract import SCHEMA, FactExtractor
from deltamem.rules import RuleSettings, check
from deltamem.types import Message, SessionRecord

FLOOR = RuleSettings(thresholds={"LOW_CONFIDENCE.mean": -0.6})


def _tokens(text: str, cuts: list[int]) -> tuple[int, ...]:
    """Byte ends of tokens cut at `cuts` (byte offsets) of `text`."""
    return (*cuts, len(text.encode("utf-8")))


def test_each_string_gets_the_mean_of_the_tokens_it_overlaps() -> None:
    text = '{"facts": ["Ada keeps bees", "Ada is a nurse"]}'
    first, second = text.index("Ada keeps"), text.index("Ada is")
    # tokens: the opening, 'Ada keeps', ' bees"', ', "', 'Ada is a nurse', '"]}'
    ends = _tokens(text, [first, first + 9, first + 15, second, second + 14])
    lps = (-0.1, -1.0, -3.0, -0.2, -0.5, -0.05)
    got = string_confidence(text, lps, ends, ["Ada keeps bees", "Ada is a nurse"])
    assert got == {"Ada keeps bees": pytest.approx(-2.0), "Ada is a nurse": pytest.approx(-0.5)}


def test_escaped_and_non_ascii_strings_are_found_by_their_bytes() -> None:
    value = {"facts": ['Léa says "bonjour" daily', "Léa lives in Lyon"]}
    text = json.dumps(value, ensure_ascii=False)
    raw = text.encode("utf-8")
    second = raw.index("Léa lives".encode())
    ends = _tokens(text, [second])  # everything before the second string is one token
    got = string_confidence(text, (-1.0, -0.25), ends, json_strings(value))
    assert got == {'Léa says "bonjour" daily': -1.0, "Léa lives in Lyon": -0.25}


def test_a_string_is_found_as_a_literal_not_inside_a_key() -> None:
    text = '{"facts": ["facts"]}'
    value_at = text.index('["') + 1  # the value's opening quote
    ends = _tokens(text, [value_at])  # the key is one token, the value the other
    assert string_confidence(text, (-4.0, -0.5), ends, ["facts"]) == {"facts": -0.5}


def test_rules_as_json_are_strict_json() -> None:
    """A floor of minus infinity (a rule off by default) is printed as null."""
    from typer.testing import CliRunner

    from deltamem.cli.main import app

    out = CliRunner().invoke(app, ["rules", "--json"])
    assert out.exit_code == 0

    def no_constants(name: str) -> None:
        raise ValueError(name)

    rules = json.loads(out.stdout, parse_constant=no_constants)
    assert {"mean": None} in [r["thresholds"] for r in rules if r["code"] == "LOW_CONFIDENCE"]


def test_no_log_probabilities_give_no_confidence() -> None:
    assert string_confidence('{"facts": ["x y z"]}', (), (), ["x y z"]) == {}
    assert string_confidence('{"facts": ["x y z"]}', (-1.0,), (3, 9), ["x y z"]) == {}


@pytest.fixture(scope="module")
def tiny() -> Any:
    from deltamem.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM(weights.tiny_model_path(), n_ctx=2048, n_threads=1, timeout=60)


def test_the_real_decoder_reports_each_tokens_log_probability(tiny: Any) -> None:
    ask = [
        {"role": "system", "content": "List the facts the person states, as JSON."},
        {"role": "user", "content": "Ada: I moved to Lisbon and I work as a nurse."},
    ]
    (out,) = tiny._chat_many([ask], schema=SCHEMA, max_tokens=48, temperature=0.0, timeout=60)
    assert 0 < len(out.logprobs) == len(out.token_ends) <= out.completion_tokens
    assert all(-50.0 < lp <= 0.0 for lp in out.logprobs)
    assert list(out.token_ends) == sorted(set(out.token_ends))
    assert out.token_ends[-1] == len(out.text.encode("utf-8"))
    (value,) = tiny.complete_json_many([ask], SCHEMA, purpose="t", max_tokens=48, confidence=True)
    sure = value[CONFIDENCE_KEY]
    assert set(sure) == set(json_strings({k: v for k, v in value.items() if k != CONFIDENCE_KEY}))
    assert all(-50.0 < v <= 0.0 for v in sure.values())
    (plain,) = tiny.complete_json_many([ask], SCHEMA, purpose="t", max_tokens=48)
    assert CONFIDENCE_KEY not in plain


def test_the_rule_is_off_by_default_and_refuses_under_its_floor() -> None:
    fact, said = "Jon runs a dance studio", "I run a dance studio downtown."
    assert check(fact, "Jon", said, None, confidence=-3.0).kept  # floor: minus infinity
    low = check(fact, "Jon", said, None, settings=FLOOR, confidence=-0.9)
    assert low.refused is not None and low.refused.code == "LOW_CONFIDENCE"
    assert check(fact, "Jon", said, None, settings=FLOOR, confidence=-0.3).kept
    assert check(fact, "Jon", said, None, settings=FLOOR).kept  # not known: not read


class SureLLM(ScriptedLLM):
    """Scripted replies with token log-probabilities: every token of a string
    holding `doubt` at -2, the rest at -0.1 (one token a character)."""

    def __init__(self, reply: dict[str, Any], doubt: str) -> None:
        super().__init__(default=reply)
        self.doubt = doubt

    def _chat(self, messages, *, schema, max_tokens, temperature, timeout) -> Completion:
        out = super()._chat(
            messages,
            schema=schema,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
        )
        at = out.text.find(self.doubt)
        lps = tuple(-2.0 if at <= i < at + len(self.doubt) else -0.1 for i in range(len(out.text)))
        return replace(out, logprobs=lps, token_ends=tuple(range(1, len(out.text) + 1)))


def test_the_extractor_refuses_a_fact_written_unsure_when_the_floor_is_set() -> None:
    reply = {"facts": ["Jon runs a dance studio downtown", "Jon teaches salsa to kids"]}
    said = "I run a dance studio downtown and teach salsa to kids."
    session = SessionRecord(
        user_id="u",
        session_id="s",
        timestamp=datetime(2025, 3, 2, tzinfo=UTC),
        messages=[Message(role="user", content=said, name="Jon")],
        content_hash="-",
    )
    for rules, kept in ((None, 2), (FLOOR, 1)):
        noops: list[Any] = []
        llm = SureLLM(reply, doubt="salsa to kids")
        extractor = FactExtractor(llm) if rules is None else FactExtractor(llm, rules=rules)
        facts = extractor.extract(session, None, noops)
        assert len(facts) == kept
        if rules is not None:
            assert [f.content for f in facts] == ["Jon runs a dance studio downtown"]
            assert [n.rule for n in noops] == ["LOW_CONFIDENCE"]
