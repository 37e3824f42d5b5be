"""The report's charts: matplotlib Figures drawn with no pyplot and no display (Agg for
PNG, the SVG backend for the inline copy), so they render the same on a headless CI box.

Every proposal is one scatter artist with gid `point-<proposal id>`, so the SVG can be
checked against the history: one point per evaluation (and per refused proposal).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from kernelloop.report.sections import Point

# marker, colour, legend text
STYLE = {
    "baseline": ("s", "#555555", "baseline"),
    "promoted": ("o", "#1a9850", "promoted"),
    "correct": ("o", "#91cf60", "judged correct, not promoted"),
    "rejected": ("X", "#d73027", "rejected"),
    "refused": ("^", "#f59e0b", "refused (not evaluated)"),
    "infrastructure": ("P", "#7b3294", "infrastructure failure (not evaluated)"),
    "pending": ("d", "#888888", "in flight (not evaluated)"),
}
_RC = {"svg.fonttype": "none", "svg.hashsalt": "kernelloop-report", "font.size": 9}


@dataclass(frozen=True)
class Chart:
    name: str
    svg: str  # inline <svg> element, without the XML prologue
    png: Path


def _save(fig: Figure, out_dir: Path, name: str) -> Chart:
    png = out_dir / f"{name}.png"
    fig.savefig(png, format="png", dpi=120, bbox_inches="tight")
    buf = io.StringIO()
    # No metadata: the default block carries Dublin Core/Creative Commons URLs, and the
    # HTML must not point outside itself.
    fig.savefig(
        buf,
        format="svg",
        bbox_inches="tight",
        metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
    )
    svg = buf.getvalue()
    svg = svg[
        svg.index("<svg") :
    ]  # drop the XML declaration and DOCTYPE: the SVG is inlined in HTML
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # Inline in HTML the parser puts <svg> and xlink:href in their namespaces itself; the
    # declarations would be the page's only URLs.
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2)
    return Chart(name, svg, png)


def progress_chart(points: list[Point], best_line: list[tuple[int, float]], out_dir: Path) -> Chart:
    """Speedup over the baseline per round: every proposal a point, the best as a step line.
    Proposals without a measurement sit on a strip at the bottom of the plot."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 3.6))
        ax = fig.add_subplot()
        strip = ax.get_xaxis_transform()  # x in rounds, y in axes fraction
        shown: set[str] = set()
        for p in points:
            marker, colour, text = STYLE.get(p.state, STYLE["pending"])
            x = p.round + (p.k - 1) * 0.12
            measured = p.objective is not None
            ax.scatter(
                [x],
                [p.objective if measured else 0.04],
                marker=marker,
                s=46,
                zorder=3,
                color=colour if measured else "none",
                edgecolors=colour,
                linewidths=1.4,
                transform=ax.transData if measured else strip,
                gid=f"point-{p.pid}",
                label=None if p.state in shown else text,
            )
            shown.add(p.state)
        if best_line:
            last = max(p.round for p in points) if points else best_line[-1][0]
            xs = [r for r, _ in best_line] + [last]
            ys = [v for _, v in best_line] + [best_line[-1][1]]
            ax.step(
                xs, ys, where="post", color="#1a9850", alpha=0.5, linewidth=1.5, label="best so far"
            )
        ax.axhline(1.0, color="#555555", linestyle=":", linewidth=1)
        # Leave the bottom 12% of the plot free for the not-measured strip.
        ys = [p.objective for p in points if p.objective is not None] + [1.0]
        lo, hi = min(ys), max(ys)
        span = max(hi - lo, 0.1)
        ax.set_ylim(lo - 0.16 * span, hi + 0.08 * span)
        ax.fill_between([0, 1], 0, 0.09, color="#f2f2f2", zorder=0, transform=ax.transAxes)
        rounds = sorted({p.round for p in points})
        ax.set_xticks(rounds, ["base" if r == 0 else str(r) for r in rounds])
        ax.set_xlabel("round (hollow markers at the bottom: not measured)")
        ax.set_ylabel("speedup over baseline\n(weighted geomean)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, frameon=False)
        return _save(fig, out_dir, "progress")


def roofline_chart(rows: list[dict[str, Any]], out_dir: Path) -> Chart | None:
    """% of the roofline floor per shape, best against baseline (None without floors)."""
    rows = [
        r
        for r in rows
        if r.get("pct_of_floor") is not None or r.get("baseline_pct_of_floor") is not None
    ]
    if not rows:
        return None
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 0.5 + 0.45 * len(rows)))
        ax = fig.add_subplot()
        ys = range(len(rows))
        best = [r.get("pct_of_floor") or 0.0 for r in rows]
        base = [r.get("baseline_pct_of_floor") or 0.0 for r in rows]
        ax.barh(
            [y + 0.2 for y in ys],
            base,
            height=0.38,
            color="#999999",
            label="baseline",
            gid="roofline-baseline",
        )
        ax.barh(
            [y - 0.2 for y in ys],
            best,
            height=0.38,
            color="#1a9850",
            label="best",
            gid="roofline-best",
        )
        ax.axvline(100, color="#333333", linestyle="--", linewidth=1)
        ax.set_yticks(list(ys), [f"{r['shape']} ({r.get('tag') or '?'})" for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, max(105.0, *best, *base))
        ax.set_xlabel("% of the roofline floor (100% = at the memory or compute roof)")
        ax.legend(loc="lower right", fontsize=8, frameon=False)
        return _save(fig, out_dir, "roofline")
