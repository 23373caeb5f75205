"""A GGUF LoRA adapter threads from Memory, LLMConfig and the CLI to llama.cpp's
`lora_path` (the real load of a trained adapter is in tests/test_grpo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deltamem.llm import LLMConfig, LLMError, make_llm
from deltamem.llm import factory as llm_factory


class _Seen(Exception):
    pass


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """LlamaCppLLM replaced by a recorder of its arguments."""
    from deltamem.llm import llamacpp

    seen: list[dict[str, Any]] = []

    def fake(path: Any, **kwargs: Any) -> Any:
        seen.append({"path": str(path), **kwargs})
        raise _Seen

    monkeypatch.setattr(llamacpp, "LlamaCppLLM", fake)
    return seen


def test_make_llm_passes_the_adapter_as_lora_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _capture(monkeypatch)
    model = tmp_path / "m.gguf"
    with pytest.raises(_Seen):
        make_llm(str(model), adapter=tmp_path / "a.gguf")
    with pytest.raises(_Seen):
        make_llm(LLMConfig(str(model), adapter="b.gguf"))
    with pytest.raises(_Seen):
        make_llm(str(model))
    assert [s["lora_path"] for s in seen] == [str(tmp_path / "a.gguf"), "b.gguf", None]


def test_an_adapter_needs_a_llama_cpp_model() -> None:
    for spec in ("http://127.0.0.1:1/v1#m", "openai:gpt-4o-mini"):
        with pytest.raises(LLMError, match="adapter applies to a llama"):
            make_llm(spec, adapter="a.gguf")


def test_memory_threads_the_adapter_into_its_llm_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from fakes import ScriptedLLM

    from deltamem import memory as memory_mod

    specs: list[Any] = []

    def fake_make_llm(spec: Any = None, **kwargs: Any) -> Any:
        specs.append(spec)
        return ScriptedLLM()

    monkeypatch.setattr(memory_mod, "make_llm", fake_make_llm)
    m = memory_mod.Memory(tmp_path / "s.db", llm="local", adapter=tmp_path / "a.gguf")
    m.llm  # noqa: B018  (loads the model)
    m2 = memory_mod.Memory(
        tmp_path / "t.db", llm=LLMConfig("tiny", timeout=5.0), adapter="b.gguf", embedder=m.embedder
    )
    m2.llm  # noqa: B018
    assert specs == [
        LLMConfig("local", adapter=str(tmp_path / "a.gguf")),
        LLMConfig("tiny", timeout=5.0, adapter="b.gguf"),
    ]
    with pytest.raises(ValueError, match="adapter"):
        memory_mod.Memory(
            tmp_path / "u.db", llm=ScriptedLLM(), adapter="a.gguf", embedder=m.embedder
        )


def test_cli_adapter_option_reaches_the_llm_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from deltamem.cli import base, main

    seen: list[Any] = []

    def fake_memory(path: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["llm"])
        raise _Seen

    monkeypatch.setattr(base, "Memory", fake_memory)
    args = ["--db", str(tmp_path / "s.db"), "--llm", "tiny", "--adapter", "x.gguf"]
    result = CliRunner().invoke(main.app, [*args, "memories", "--user", "u"])
    assert isinstance(result.exception, _Seen)
    assert seen == [LLMConfig("tiny", adapter="x.gguf")]


def test_llama_cpp_refuses_a_missing_or_broken_adapter(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from deltamem.llm import weights

    try:
        base = weights.tiny_model_path()
    except Exception as exc:  # the tiny extra is not installed
        pytest.skip(f"no tiny model: {exc}")
    with pytest.raises(LLMError, match="adapter file not found"):
        llm_factory.make_llm(str(base), adapter=tmp_path / "missing.gguf")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(LLMError, match="cannot apply the adapter"):
        llm_factory.make_llm(str(base), adapter=broken, n_ctx=256)
