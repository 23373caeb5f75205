"""report.html: one self-contained file of tables and inline SVG charts, built from
metrics.json and results.jsonl only."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from deltamem.bench.cli import app
from deltamem.bench.report import render, write_report
from deltamem.bench.report_parts import bar_chart, line_chart


def halumem_metrics() -> dict[str, Any]:
    def system(f1: float, qa_c: float, qpm: float) -> dict[str, Any]:
        return {
            "extraction": {
                "recall": 0.8125,
                "weighted_recall": 0.8,
                "target_precision": 0.7,
                "accuracy": 0.65,
                "fmr": 0.5,
                "f1": f1,
                "state_f1": 0.6,
                "by_memory_type": {"Persona Memory": {"recall": 0.9, "weighted_recall": 0.9,
                                                      "fmr": None}},
            },
            "update": {"correct": 0.25, "hallucination": 0.5, "omission": 0.25, "n": 4},
            "qa": {
                "correct": qa_c,
                "hallucination": 0.1,
                "omission": 0.2,
                "n": 10,
                "by_type": {
                    "Basic Fact Recall": {"correct": 0.75, "hallucination": 0.25,
                                          "omission": 0.0, "n": 4},
                    "Memory Boundary": {"correct": 0.5, "hallucination": 0.5,
                                        "omission": 0.0, "n": 6},
                },
            },
            "qa_by_session": [
                {"session": 0, "n": 4, "accuracy": 0.75},
                {"session": 2, "n": 10, "accuracy": 0.6},
            ],
            "retrieval": {"update_hit_at_10": 1.0, "qa_evidence_recall_at_20": 0.9, "errors": 0},
            "cost": {"sessions": 3, "llm_calls_per_session": 2.5, "write_amplification": 7.25,
                     "qpm": qpm, "prompt_tokens_per_session": 900.0},
        }  # fmt: skip

    return {"deltamem": system(0.5731, 0.7123, 0.13), "pipeline": system(0.4417, 0.5302, 1.0)}


def halumem_records() -> list[dict[str, Any]]:
    out = []
    for system, secs in (("deltamem", 2.0), ("pipeline", 9.0)):
        for s in range(3):
            out.append(
                {
                    "key": f"{system}|u|{s}",
                    "kind": "session",
                    "system": system,
                    "user": "u",
                    "session": s,
                    "cost": {"add_seconds": secs + s, "prompt_tokens": 100 * (s + 1)},
                }
            )
            out.append({"key": f"{system}|u|{s}|q", "kind": "question", "system": system,
                        "user": "u", "session": s, "evidence_recall": 0.5})  # fmt: skip
    return out


SVG = "{http://www.w3.org/2000/svg}"


def svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(x) for x in re.findall(r"<svg.*?</svg>", page, re.S)]


def marks(chart: ET.Element, kind: str) -> list[ET.Element]:
    """The chart's bars ("bar") or lines ("line"): matplotlib groups each drawn mark
    in a <g> with the id the chart gave it."""
    return [g for g in chart.iter(f"{SVG}g") if (g.get("id") or "").startswith(f"{kind}-")]


def test_halumem_report_has_numbers_and_valid_svg() -> None:
    page = render(halumem_metrics(), halumem_records())
    assert page.startswith("<!DOCTYPE html>") and "$" not in page.split("<body>")[1][:50]
    for number in ("0.573", "0.442", "0.712", "0.530", "7.250", "0.130", "1.000"):
        assert number in page
    charts = svgs(page)
    assert len(charts) >= 8
    titles = [c.get("aria-label") for c in charts]
    assert "Memory extraction" in titles and "Cumulative QA accuracy by session index" in titles
    assert "Time to add a session (s), by session index" in titles
    # one bar per (system, extraction metric), each labelled with its value
    extraction = charts[titles.index("Memory extraction")]
    bars = [g.find(f"{SVG}title") for g in marks(extraction, "bar")]
    assert len(bars) == 2 * 7
    assert "pipeline · F1: 0.442" in [b.text for b in bars if b is not None]
    # per-question-type bars and the cumulative lines per system
    assert "Basic Fact Recall" in page and sum(len(marks(c, "line")) for c in charts) >= 2 * 3
    # self-contained: no script, no external resource (the URLs are XML namespaces)
    assert "<script" not in page
    assert not re.search(r"(src|href)=\"https?:", page)
    assert set(re.findall(r"https?://[^\"]+", page)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


def test_locomo_report_and_missing_values() -> None:
    cat = {"f1": 0.4, "bleu1": 0.3, "judge": None, "evidence_recall": 0.2, "n": 5}
    metrics = {
        "deltamem": {"f1": 0.4321, "bleu1": 0.3, "judge": None, "evidence_recall": 0.2, "n": 5,
                     "by_category": {"multi-hop": cat, "temporal": cat | {"f1": 0.6789}},
                     "cost": {"qpm": 0.0}},
    }  # fmt: skip
    page = render(metrics, [])
    assert "LoCoMo" in page and "0.432" in page and "0.679" in page
    assert "token F1 by category" in page and "–" in page  # the judge never ran
    svgs(page)


def test_charts_clip_and_handle_empty_series() -> None:
    (chart,) = svgs(bar_chart("b", ["x", "y"], {"s": [5.0, None]}, ymax=1.0))
    (bar,) = marks(chart, "bar")  # the missing value is a dash, not a bar
    assert bar.findtext(f"{SVG}title") == "s · x: 5.000"  # drawn up to ymax, labelled in full
    assert "–" in [t.text for t in chart.iter(f"{SVG}text")]
    (empty,) = svgs(line_chart("l", {"s": []}))
    assert empty.get("aria-label") == "l"


def test_report_command_rebuilds_from_files(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text(json.dumps(halumem_metrics()))
    (tmp_path / "results.jsonl").write_text(
        "\n".join(json.dumps(r) for r in halumem_records()) + "\n"
    )
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "report.html").read_text()
    assert "0.573" in page and "pipeline" in page
    assert write_report(tmp_path) == tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code != 0


def test_judge_free_halumem_report_shows_what_was_measured(
    tmp_path: Path, embedder: Any, session_strategy: None
) -> None:
    from test_bench_halumem import FIX, make_llm

    from deltamem.bench.halumem import HaluMemRun, run_halumem

    out = tmp_path / "run"
    run_halumem(
        HaluMemRun(data=FIX, out=out, systems=["deltamem", "retrieval"]),
        llm=make_llm(),
        embedder=embedder,
    )
    page = (out / "report.html").read_text()
    titles = [c.get("aria-label") for c in svgs(page)]
    # no judge ran: no verdict panels, and nothing drawn without a number
    for empty in ("Memory updating", "Question answering", "QA C share by question type",
                  "Cumulative QA accuracy by session index"):  # fmt: skip
        assert empty not in titles
    assert "No QA verdicts (no judge ran)" in page
    # what a judge-free run measures, per session
    assert "State F1 by session index (judge-free)" in titles
    assert "QA evidence coverage by session index (judge-free)" in titles
    extraction = svgs(page)[titles.index("Memory extraction")]
    labels = [t.text for t in extraction.iter("{http://www.w3.org/2000/svg}text")]
    assert "state F1" in labels and "recall" not in labels  # only the measured metric
    for chart in svgs(page):  # every panel has a bar or a line
        assert marks(chart, "bar") or marks(chart, "line"), chart.get("aria-label")
