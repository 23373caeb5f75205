"""Our own llama.cpp decoding loop (deltamem/llm/llamacpp_decoder.py) on the real
engine with the tiny model, and `complete_json_many`, the batched JSON call the
extractor makes, on a scripted model."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import ScriptedLLM

from deltamem.llm import weights
from deltamem.llm.base import LLMOutputError, LLMTimeout
from deltamem.manager.extract import SCHEMA, FactExtractor
from deltamem.types import Message, SessionRecord

SYSTEM = {
    "role": "system",
    "content": "You list the facts a person states about themselves, as JSON. "
    "Each fact is one short sentence in the third person that names the person. " * 3,
}
SAID = [
    "Ada: I moved to Lisbon last spring and I work as a nurse.",
    "Ada: My sister Rosa visits me every May.",
    "Ada: I have a cat called Miso.",
    "Ada: I started learning the cello.",
    "Ada: I can't stand loud restaurants.",
    "Ada: My favourite book is Middlemarch.",
]


def _asks(texts: list[str]) -> list[list[dict[str, str]]]:
    return [[SYSTEM, {"role": "user", "content": t}] for t in texts]  # type: ignore[list-item]


@pytest.fixture(scope="module")
def tiny() -> Any:
    from deltamem.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM(weights.tiny_model_path(), n_ctx=2048, n_threads=1, timeout=60)


def test_greedy_with_grammar_is_what_llama_cpp_python_writes(tiny: Any) -> None:
    """Checking the grammar against the greedy token first, and only then against
    every token, picks what applying it to every token picks: the reply is the one
    llama-cpp-python's own loop gives (a separate Llama, its own context)."""
    from llama_cpp import Llama

    reference = Llama(
        model_path=str(weights.tiny_model_path()), n_ctx=2048, n_threads=1, verbose=False
    )
    try:
        for ask in _asks(SAID[:3]):
            theirs = reference.create_chat_completion(
                messages=ask,  # type: ignore[arg-type]
                max_tokens=60,
                temperature=0.0,
                response_format={"type": "json_object", "schema": SCHEMA},
            )
            ours = tiny._call(ask, schema=SCHEMA, max_tokens=60, temperature=0.0, purpose="t")
            assert ours.text == theirs["choices"][0]["message"]["content"]  # type: ignore[index]
            assert ours.completion_tokens == theirs["usage"]["completion_tokens"]  # type: ignore[index]
    finally:
        reference.close()


def test_more_prompts_than_slots_come_back_in_order_each_within_its_cap(tiny: Any) -> None:
    asks = _asks(SAID)  # six prompts, four slots: two wait for a slot to free
    assert len(asks) > tiny.batch_size
    outs = tiny._chat_many(asks, schema=SCHEMA, max_tokens=48, temperature=0.0, timeout=60)
    assert len(outs) == len(asks)
    for ask, out in zip(asks, outs, strict=True):
        assert 0 < out.completion_tokens <= 48
        alone = tiny._chat(ask, schema=SCHEMA, max_tokens=48, temperature=0.0, timeout=60)
        # the same prompt alone: the same start (side by side, sums may round apart)
        assert out.text[:12] == alone.text[:12]
        assert out.text.startswith("{")


def test_prompts_asked_together_evaluate_their_shared_start_once(tiny: Any) -> None:
    from deltamem.llm.llamacpp import LlamaCppLLM

    fresh = LlamaCppLLM(weights.tiny_model_path(), n_ctx=2048, n_threads=1, timeout=60)
    asks = _asks(SAID[:4])
    outs = fresh._chat_many(asks, schema=SCHEMA, max_tokens=8, temperature=0.0, timeout=60)
    evaluated = [o.prompt_tokens - o.cached_tokens for o in outs]
    prefix = len(fresh._tokens(asks[0])) - evaluated[1]  # what the second took from the cache
    assert evaluated[0] == outs[0].prompt_tokens  # the first pays for everything
    assert prefix > 60  # the system prompt, read once for all four
    assert all(e < outs[0].prompt_tokens - 60 for e in evaluated[1:])


def test_the_cache_holds_each_slot_apart_after_a_batch(tiny: Any) -> None:
    """A batch leaves the four slots holding other prompts, their shared start
    copied between them. A prompt asked again afterwards reads the same cached
    start and evaluates the same tokens of its own, so it scores exactly as before:
    nothing of the other sequences leaks into its attention. (Evaluating a
    different number of tokens at once may move the logits a little: llama.cpp
    picks its matrix kernels by batch size.)"""
    first, ask = _asks(["Paris is lovely in spring.", "Is water wet?"])
    tiny.option_logprobs(first, ["yes", "no"], purpose="t")  # reads the system prompt
    before = tiny.option_logprobs(ask, ["yes", "no"], purpose="t")  # and then its own words
    tiny._chat_many(_asks(SAID[:5]), schema=SCHEMA, max_tokens=12, temperature=0.0, timeout=60)
    assert tiny.option_logprobs(ask, ["yes", "no"], purpose="t") == pytest.approx(before, abs=1e-6)


def test_a_batch_has_the_time_limit_of_its_calls_together() -> None:
    from deltamem.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(weights.tiny_model_path(), n_ctx=2048, n_threads=1, timeout=0.01)
    with pytest.raises(LLMTimeout):
        llm.complete_json_many(_asks(SAID[:3]), SCHEMA, purpose="t", max_tokens=400)
    assert llm.usage.calls == 1 and llm.usage.completion_tokens == 0  # logged once, no retry


# --- complete_json_many on a scripted model --------------------------------------------------
def test_a_bad_reply_in_a_batch_is_asked_again_alone_and_the_rest_kept() -> None:
    llm = ScriptedLLM(['{"facts": ["A"]}', "not json", '{"facts": ["C"]}', '{"facts": ["B"]}'])
    out = llm.complete_json_many(_asks(["a", "b", "c"]), SCHEMA, purpose="t")
    assert out == [{"facts": ["A"]}, {"facts": ["B"]}, {"facts": ["C"]}]
    assert [r["temperature"] for r in llm.requests] == [0.0, 0.0, 0.0, 0.7]  # the retry samples
    assert llm.usage.calls == 4


def test_a_reply_that_fails_its_retries_is_returned_as_its_error() -> None:
    llm = ScriptedLLM(['{"facts": ["A"]}', "nope", "still nope"])
    out = llm.complete_json_many(_asks(["a", "b"]), SCHEMA, purpose="t")
    assert out[0] == {"facts": ["A"]} and isinstance(out[1], LLMOutputError)
    no_retry = ScriptedLLM(["nope"], retries=0)
    (only,) = no_retry.complete_json_many(_asks(["a"]), SCHEMA, purpose="t")
    assert isinstance(only, LLMOutputError) and no_retry.usage.calls == 1


# --- the extractor asks a session's turns together -----------------------------------------
class CountingLLM(ScriptedLLM):
    def __init__(self) -> None:
        super().__init__(default=lambda messages: {"facts": []})
        self.batches: list[int] = []

    def _chat_many(self, prompts: Any, **kwargs: Any) -> Any:
        self.batches.append(len(prompts))
        return super()._chat_many(prompts, **kwargs)


def _session(named: bool, said: list[str] = SAID[:4]) -> SessionRecord:
    messages = []
    for i, text in enumerate(said):
        messages.append(Message(role="assistant", content=f"Tell me more ({i})."))
        messages.append(Message(role="user", content=text, name="Ada" if named else None))
    return SessionRecord(
        user_id="u",
        session_id="s",
        timestamp=datetime(2025, 3, 2, 10, tzinfo=UTC),
        messages=messages,
        content_hash="-",
    )


def test_the_extractor_asks_all_turns_at_once_when_it_knows_the_name() -> None:
    named = CountingLLM()
    FactExtractor(named).extract(_session(named=True), None, [])
    assert named.batches == [4]
    known = CountingLLM()
    FactExtractor(known).extract(_session(named=False), "Ada Lovelace", [])
    assert known.batches == [4]


def test_the_extractor_goes_turn_by_turn_until_a_fact_names_the_person() -> None:
    llm = CountingLLM()
    # the first turn names her
    llm.push({"facts": ["The user says the name is Ada Byron.", "The user keeps bees."]})
    noops: list[Any] = []
    said = ["Hello! The name is Ada Byron, and I keep bees.", *SAID[1:4]]
    facts = FactExtractor(llm).extract(_session(named=False, said=said), None, noops)
    assert llm.batches == [1, 3]  # then the other three together
    later = [json.dumps(r["messages"]) for r in llm.requests[1:]]
    assert all("Ada Byron" in text for text in later)
    assert [f.content for f in facts][:1] == ["The user says the name is Ada Byron."]


def test_an_openai_compatible_server_gets_a_batch_concurrently() -> None:
    """Four prompts of one `complete_json_many` are in flight at once (the stub
    answers none until all four have arrived), and come back in order."""
    import threading

    from llm_stub import LLMStub

    from deltamem.llm.openai_compat import OpenAICompatLLM

    together = threading.Barrier(4, timeout=10)

    def answer(prompt: str) -> dict[str, Any]:
        together.wait()  # broken (an error reply) if the four came one after another
        return {"facts": [prompt]}

    with LLMStub(answer) as stub:
        llm = OpenAICompatLLM(f"http://127.0.0.1:{stub.port}/v1", "stub", timeout=30)
        out = llm.complete_json_many(_asks(SAID[:4]), SCHEMA, purpose="t")
    assert out == [{"facts": [text]} for text in SAID[:4]]
    assert llm.usage.calls == 4


def test_a_block_said_three_times_over_ends_the_reply_at_its_first_copy(tiny: Any) -> None:
    """The tiny model answers this with "apple, apple, ..." to its token cap; the
    decoder ends it once a block has come three times in a row, keeps the first
    copy, and counts the tokens it generated."""
    from deltamem.llm import llamacpp_decoder

    ask = _asks(["List: apple, apple, apple, apple, apple, apple, apple, apple"])[0]
    out = tiny._chat(ask, schema=None, max_tokens=120, temperature=0.0, timeout=60)
    assert out.completion_tokens < 40
    assert out.text.lower().count("apple") <= 3
    assert llamacpp_decoder.repeated_tail([5, 1, 2, 3, 4] * 3) == 5
    assert llamacpp_decoder.repeated_tail([1, 2, 3, 4] * 2) == 0  # twice is not a loop
    assert llamacpp_decoder.repeated_tail([1, 2, 3] * 3) == 0  # too short a block to tell
