"""The report's charts, drawn by matplotlib (Agg, SVG output) and inlined in the HTML.

Each chart is one `<figure>` holding its title as the caption and the SVG as
matplotlib writes it, less its `<metadata>` block, with `role="img"` and the title
as `aria-label` on the root, and a tooltip (`<title>`) on each bar and point:
"system · group: value". Text stays text (`svg.fonttype = none`), so the labels
are searchable and take the page's font. No script, nothing fetched.
"""

from __future__ import annotations

import html
import io
import math
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, whatever the environment says
import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

PALETTE = ["#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5"]
STYLE: dict[Any, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "deltamem",  # the same ids on every run: reports diff cleanly
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#eeeeee",
    "axes.axisbelow": True,
}
DPI = 100  # width and height are given in pixels
_LOCK = threading.Lock()  # pyplot's figure registry is global

Num = float | int | None


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def fmt(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(float(v)) else float(v)


def short(label: str, n: int = 22) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def bar_chart(
    title: str,
    groups: Sequence[str],
    series: dict[str, Sequence[Num]],
    *,
    ymax: float | None = None,
    width: int = 520,
    height: int = 260,
) -> str:
    """Grouped bars: one group per label in `groups`, one bar per series (system);
    a missing value is a dash where its bar would be."""
    values = [num(v) for vs in series.values() for v in vs]
    top = ymax if ymax is not None else nice_max(max([v for v in values if v is not None] or [0]))
    n = max(1, len(series))
    bar_w = 0.8 / n
    tips: dict[str, str] = {}
    with _LOCK, plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
        try:
            for si, (name, vs) in enumerate(series.items()):
                color = PALETTE[si % len(PALETTE)]
                for gi, v in enumerate(vs):
                    x = gi - 0.4 + (si + 0.5) * bar_w
                    val = num(v)
                    if val is None:
                        ax.text(x, 0, "–", ha="center", va="bottom", color="#999999")
                        continue
                    gid = f"bar-{si}-{gi}"
                    (bar,) = ax.bar(x, min(max(val, 0.0), top), bar_w * 0.95, color=color)
                    bar.set_gid(gid)
                    tips[gid] = f"{name} · {groups[gi]}: {fmt(val)}"
            ax.set_xticks(range(len(groups)), [short(g) for g in groups], rotation=30, ha="right")
            ax.set_xlim(-0.5, len(groups) - 0.5)
            ax.set_ylim(0, top)
            colors = [PALETTE[i % len(PALETTE)] for i in range(len(series))]
            _legend(ax, [Patch(color=c, label=s) for c, s in zip(colors, series, strict=True)])
            return _figure(fig, title, tips)
        finally:
            plt.close(fig)


def line_chart(
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    xlabel: str = "",
    ymax: float | None = None,
    width: int = 520,
    height: int = 260,
) -> str:
    """Lines of (x, y) points, one per series (system)."""
    ys = [y for s in series.values() for _, y in s]
    top = ymax if ymax is not None else nice_max(max(ys or [0]))
    tips: dict[str, str] = {}
    with _LOCK, plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
        try:
            for si, (name, s) in enumerate(series.items()):
                color = PALETTE[si % len(PALETTE)]
                xs = [x for x, _ in s]
                clipped = [min(max(y, 0.0), top) for _, y in s]
                (line,) = ax.plot(xs, clipped, color=color, linewidth=2, label=name)
                line.set_gid(f"line-{si}")
                for pi, (x, y) in enumerate(s):
                    (point,) = ax.plot([x], [clipped[pi]], "o", color=color, markersize=4)
                    point.set_gid(f"point-{si}-{pi}")
                    tips[f"point-{si}-{pi}"] = f"{name} · {fmt(x)}: {fmt(y)}"
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, top)
            if xlabel:
                ax.set_xlabel(xlabel)
            _legend(ax, [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")])
            return _figure(fig, title, tips)
        finally:
            plt.close(fig)


def _legend(ax: Any, handles: Sequence[Any]) -> None:
    """The series' names under the plot."""
    if handles:
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.3),
            ncols=min(len(handles), 4),
            frameon=False,
            handlelength=1,
        )


def _figure(fig: Any, title: str, tips: dict[str, str]) -> str:
    """The figure as inline SVG in a <figure>, with its caption and tooltips."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]  # no XML declaration or DOCTYPE inside HTML
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{esc(title)}" ', 1)
    for gid, tip in tips.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{esc(tip)}</title>', 1)
    return f"<figure><figcaption>{esc(title)}</figcaption>{svg}</figure>"
