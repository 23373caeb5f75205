"""One renderer for what a run shows: each benchmark describes its page once, as a
list of blocks (headings, notes, tables, charts), and the same blocks become
report.html (`html`) and the Markdown of `deltamem bench tables` (`markdown`,
which leaves the charts out). Number formats, escaping and the judge's κ beside
every judged figure (`kappa.py`) are done here and nowhere else.
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltamem.bench import kappa


@dataclass
class Heading:
    text: str


@dataclass
class Note:
    text: str


@dataclass
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    title: str = ""
    # header -> the judges behind that column: their κ is shown beside it
    judged: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class Charts:
    """Inline SVG figures for report.html, drawn only when the page is (Markdown
    has none); `empty` is said when no figure has a number to draw."""

    draw: Callable[[], Sequence[str]]
    empty: str = ""


Block = Heading | Note | Table | Charts


def esc(x: object) -> str:
    return _html.escape(str(x), quote=True)


def fmt(v: Any, digits: int = 3) -> str:
    """A cell as text: – for a missing number, thousands separators, 3 decimals
    below 100 (shares, seconds, ratios), none above (tokens, counts)."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.{digits}f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def get(d: Any, *path: str) -> Any:
    """d[path[0]][path[1]]..., None where a step is missing."""
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _one_judge(t: Table) -> tuple[str, ...] | None:
    """The judges behind every figure of a titled table (all its columns but the
    first and n judged alike), else None."""
    figures = [h for h in t.headers[1:] if h != "n"]
    judges = {t.judged.get(h) for h in figures}
    one = next(iter(judges)) if len(judges) == 1 else None
    return one if t.title and one else None


def title_of(t: Table) -> str:
    """The table's title; with its judge's κ when one judge gives all its figures."""
    one = _one_judge(t)
    return f"{t.title} ({kappa.label(one)})" if one else t.title


def headers_of(t: Table) -> list[str]:
    """The table's headers, a judged column's with its judge's κ (unless the title
    carries it for all)."""
    if _one_judge(t):
        return list(t.headers)
    return [f"{h} ({kappa.label(t.judged[h])})" if h in t.judged else h for h in t.headers]


def _with_kappa_note(blocks: Sequence[Block]) -> list[Block]:
    """The blocks, with the κ note after the first table that shows a judged figure."""
    out: list[Block] = []
    noted = False
    for b in blocks:
        out.append(b)
        if not noted and isinstance(b, Table) and b.judged and b.rows:
            out.append(Note(kappa.note()))
            noted = True
    return out


# --- HTML ------------------------------------------------------------------------------------
def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(fmt(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def panels(figures: Sequence[str]) -> str:
    """The non-empty figures side by side; "" when all are empty."""
    kept = [f for f in figures if f]
    return '<div class="charts">' + "\n".join(kept) + "</div>" if kept else ""


def html(blocks: Sequence[Block]) -> str:
    out = []
    for b in _with_kappa_note(blocks):
        if isinstance(b, Heading):
            out.append(f"<h2>{esc(b.text)}</h2>")
        elif isinstance(b, Note):
            out.append(f'<p class="note">{esc(b.text)}</p>')
        elif isinstance(b, Table):
            if b.title:
                out.append(f"<h3>{esc(title_of(b))}</h3>")
            out.append(html_table(headers_of(b), b.rows))
        else:
            figures = panels(b.draw())
            if figures:
                out.append(figures)
            elif b.empty:
                out.append(f'<p class="note">{esc(b.empty)}</p>')
    return "\n".join(out)


# --- Markdown --------------------------------------------------------------------------------
def _cell(v: Any) -> str:
    return fmt(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _without_charts(blocks: Sequence[Block]) -> list[Block]:
    """The blocks but charts, and a heading with nothing but charts under it."""
    out: list[Block] = []
    for i, b in enumerate(blocks):
        if isinstance(b, Charts):
            continue
        if isinstance(b, Heading):
            section = list(blocks[i + 1 :])
            end = next((j for j, x in enumerate(section) if isinstance(x, Heading)), len(section))
            if all(isinstance(x, Charts) for x in section[:end]):
                continue
        out.append(b)
    return out


def markdown(blocks: Sequence[Block]) -> str:
    out = []
    for b in _with_kappa_note(_without_charts(blocks)):
        if isinstance(b, Heading):
            out.append(f"## {b.text}")
        elif isinstance(b, Note):
            out.append(b.text)
        elif isinstance(b, Table):
            if b.title:
                out.append(title_of(b))
            out.append(markdown_table(headers_of(b), b.rows))
    return "\n\n".join(out)
