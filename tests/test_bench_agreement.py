"""Judge agreement: a scripted judge on a tiny labels fixture, the numbers worked
out by hand; and the shipped labels are well formed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedLLM
from typer.testing import CliRunner

import deltamem.llm
from deltamem.bench.agreement import (
    CLASSES,
    JUDGES,
    _Sessions,
    cohen_kappa,
    load_labels,
    run_agreement,
)
from deltamem.bench.cli import app
from deltamem.bench.judges.base import PROMPTS
from deltamem.llm.base import ChatMessage

FIXTURES = Path(__file__).parent / "fixtures"
LABELS = FIXTURES / "labels"
REPO_LABELS = Path(__file__).parent.parent / "bench" / "labels"
DEV_DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "halumem"


def rubric(name: str) -> str:
    return (PROMPTS / f"{name}.system.txt").read_text(encoding="utf-8").strip()


def judge(messages: list[ChatMessage]) -> Any:
    system, item = messages[0]["content"], messages[-1]["content"]
    if system == rubric("integrity"):
        fact = item.rsplit("Reference fact:", 1)[1]
        score = 2 if "Pixel" in fact else 0 if "jazz" in fact else 1
        return {"reason": "r", "score": score}
    if system == rubric("accuracy"):
        assert "My cat Pixel keeps me company" in item  # the dialogue came from the data
        assert "Dana Reyes enjoys jazz concerts." not in item.split("Extracted memory")[0]
        return {"reason": "r", "score": 2, "included": True}
    if system == rubric("update"):
        return {"reason": "r", "verdict": "correct"}
    if system == rubric("locomo"):
        pred = item.rsplit("Generated answer:", 1)[1]
        return {"reason": "r", "label": "WRONG" if "Leeds" in pred else "CORRECT"}
    pred = item.rsplit("Assistant's answer:", 1)[1]
    verdict = "correct" if "York" in pred or "not known" in pred else "hallucination"
    return {"reason": "r", "verdict": verdict}


def test_kappa_by_hand() -> None:
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "b"], ["a", "a"]) == pytest.approx(0.0)
    assert cohen_kappa([1, 1], [1, 1]) is None  # one class only: undefined
    assert cohen_kappa([], []) is None


def test_agreement_numbers_and_cache(tmp_path: Path) -> None:
    llm = ScriptedLLM(default=judge)
    out = tmp_path / "agr"
    r = run_agreement(LABELS, llm, data=FIXTURES, out=out, mode="rubric", split="all")
    integ = r["integrity"]
    # human [2,0,1,2,0] vs judge [2,0,1,1,0]; the empty-memories item needs no call
    assert integ["n"] == 5 and integ["accuracy"] == pytest.approx(0.8)
    assert integ["kappa"] == pytest.approx((0.8 - 0.32) / 0.68)
    assert integ["confusion"] == [[2, 0, 0], [0, 1, 0], [0, 1, 1]]
    qa = r["qa"]  # human [c,c,h,o] vs judge [c,c,h,h]
    assert qa["n"] == 4 and qa["accuracy"] == pytest.approx(0.75)
    assert qa["kappa"] == pytest.approx((0.75 - 0.375) / 0.625)
    assert qa["confusion"][2] == [0, 1, 0]  # the omission was called a hallucination
    upd = r["update"]
    assert upd["accuracy"] == pytest.approx(0.5) and upd["kappa"] == pytest.approx(0.0)
    acc = r["accuracy"]  # the item pointing at a missing session is skipped
    assert acc["n"] == 2 and acc["skipped"] == 1 and acc["accuracy"] == pytest.approx(0.5)
    assert acc["included"]["accuracy"] == pytest.approx(0.5)
    loc = r["locomo"]  # human [c,w,w] vs judge [c,w,c]; upper-case verdicts normalised
    assert loc["n"] == 3 and loc["accuracy"] == pytest.approx(2 / 3)
    assert loc["confusion"] == [[1, 0], [1, 1]]
    assert loc["kappa"] == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
    calls = len(llm.requests)
    assert calls == 4 + 2 + 2 + 4 + 3
    assert json.loads((out / "agreement.json").read_text())["qa"]["n"] == 4
    rows = [json.loads(x) for x in (out / "agreement_items.jsonl").read_text().splitlines()]
    assert {"id": "qa-4", "label": "omission", "judge": "hallucination"}.items() <= next(
        x for x in rows if x["id"] == "qa-4"
    ).items()


def test_cache_is_used_for_the_same_model(tmp_path: Path) -> None:
    out = tmp_path / "agr"
    run_agreement(
        LABELS,
        ScriptedLLM(default=judge),
        data=FIXTURES,
        out=out,
        judges=["qa"],
        mode="rubric",
        split="all",
    )
    second = ScriptedLLM()  # no replies: any call would fail the test
    r = run_agreement(
        LABELS, second, data=FIXTURES, out=out, judges=["qa"], mode="rubric", split="all"
    )
    assert second.requests == [] and r["qa"]["accuracy"] == pytest.approx(0.75)
    assert set(r) == {"qa", "_meta"}


def test_agreement_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltamem.llm, "make_llm", lambda spec=None, **_: ScriptedLLM(default=judge))
    args = ["agreement", "--judge", "x", "--labels", str(LABELS), "--data", str(FIXTURES)]
    args += ["--judge-mode", "rubric", "--split", "all"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "kappa" in res.output and "0.706" in res.output
    assert (tmp_path / "a" / "agreement.json").exists()
    res = CliRunner().invoke(app, [*args, "--judges", "nope"])
    assert res.exit_code != 0


def test_shipped_labels_are_well_formed() -> None:
    labels = load_labels(REPO_LABELS)
    assert set(labels) == set(JUDGES)
    for name, items in labels.items():
        assert len(items) >= 30, name
        assert len({i["id"] for i in items}) == len(items)
        # the fixed halves: test when the SHA-256 of the id is odd (README)
        for i in items:
            odd = int(hashlib.sha256(i["id"].encode()).hexdigest(), 16) % 2
            assert i["split"] == ("test" if odd else "tune"), i["id"]
        values = [i["label"] for i in items]
        assert all(v in CLASSES[name] for v in values), name
        wanted = min(3, len(CLASSES[name]))
        assert len(set(values)) >= wanted, f"{name}: labels should span the classes"
        assert {i["case"] for i in items} == {"positive", "negative", "borderline"}
        for i in items:
            assert i["why"].strip() and len(i["why"]) < 200
            strings = [s for v in i["inputs"].values() for s in (v if isinstance(v, list) else [v])]
            assert all(len(s) < 400 for s in strings), i["id"]  # short strings only
    # `included`, where labelled, is a bool (the manager's own memories, accuracy-061
    # on, carry none: README)
    flagged = [i for i in labels["accuracy"] if "included" in i]
    assert len(flagged) >= 60 and all(isinstance(i["included"], bool) for i in flagged)
    if DEV_DATA.exists():  # accuracy items point at real sessions of the dev data
        sessions = _Sessions(DEV_DATA)
        assert all(sessions.get(i["source"]) is not None for i in labels["accuracy"])
    # LoCoMo items come from conv-26 (written by us) and conv-41-43 (the embedded
    # answerer's, read by two blind readers), not conv-30, and quote the questions and
    # reference answers of the conversation they name exactly
    by_conv: dict[str, set[tuple[str, str]]] = {}
    for i in labels["locomo"]:
        key = (i["inputs"]["question"], i["inputs"]["answer"])
        by_conv.setdefault(i["source"]["sample_id"], set()).add(key)
    assert set(by_conv) == {"conv-26", "conv-41", "conv-42", "conv-43"}
    for name, conv_id in (
        ("locomo10-dev.json", "conv-26"),
        ("locomo10-dev-more.json", "conv-41"),
        ("locomo10-dev-more.json", "conv-42"),
        ("locomo10-dev-more.json", "conv-43"),
    ):
        path = DEV_DATA.parent / "locomo" / name
        if not path.exists():
            continue
        conv = next(c for c in json.loads(path.read_text()) if c["sample_id"] == conv_id)
        gold = {(q["question"], str(q["answer"])) for q in conv["qa"] if "answer" in q}
        assert by_conv[conv_id] <= gold, conv_id
