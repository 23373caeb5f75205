"""The one-screen summary a bench command prints on stdout at the end (the metrics
JSON stays in the run directory), and the report's tables kept inside the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.bench.cli_options import SUMMARY_ROWS, print_summary, summary_rows

HALUMEM = {
    "deltamem": {
        "extraction": {"recall": 0.5, "f1": None, "by_memory_type": {"persona": {"recall": 1}}},
        "qa": {"correct": 0.75, "n": 4, "by_type": {"x": {"correct": 1.0}}},
        "qa_by_session": [{"n": 1}],
        "cost": {"sessions": 3, "prompt_tokens": 900.0, "llm_calls_per_session": 2.0},
    },
    "recent": {"extraction": {"recall": 0.25}, "qa": {"correct": 0.5, "n": 4}},
}


def test_summary_rows_are_the_headline_figures_of_each_system() -> None:
    systems, rows = summary_rows(HALUMEM)
    assert systems == ["deltamem", "recent"]
    assert rows == [
        ("extraction.recall", [0.5, 0.25]),
        ("extraction.f1", [None, None]),
        ("qa.correct", [0.75, 0.5]),
        ("qa.n", [4, 4]),
        ("cost.llm_calls_per_session", [2.0, None]),
    ]


def test_print_summary_fits_one_screen_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many = {"full": {"benchmark": "locomo", **{f"m{i}": i / 7 for i in range(50)}}}
    print_summary(many, tmp_path)
    out = capsys.readouterr().out
    assert "locomo" in out and "m0" in out and f"m{SUMMARY_ROWS - 1}" in out
    assert f"m{SUMMARY_ROWS} " not in out and "20 more figures" in out
    assert str(tmp_path / "metrics.json") in out.replace("\n", "")
    assert len(out.splitlines()) < 45
    assert "{" not in out  # no JSON on the screen
    print_summary(HALUMEM, tmp_path)
    out = capsys.readouterr().out
    assert "0.750" in out and "—" in out and "qa_by_session" not in out


def test_the_report_tables_scroll_inside_the_page() -> None:
    from importlib import resources

    css = resources.files("deltamem.bench").joinpath("report_template.html").read_text()
    rule = next(line for line in css.splitlines() if line.startswith("table {"))
    assert "overflow-x: auto" in rule and "max-width: 100%" in rule and "display: block" in rule
