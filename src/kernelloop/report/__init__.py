"""The reviewer's report of a run: per-round chart, roofline position, per-shape table,
claims vs measurements, metric deltas, cost ledger and a review checklist, as Markdown
(with PNG charts beside it) and as one self-contained HTML file."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelloop.report.render import ReportFiles, write_report

__all__ = ["ReportFiles", "write_report"]


def __getattr__(name: str) -> object:
    """`write_report` and `ReportFiles` loaded on first use: render imports matplotlib
    (~0.9 s measured with -X importtime), which a sibling module's import (the leaderboard,
    `is_suite`) or a usage error of `kernelloop report` does not need (issue 36: usage
    errors in <= 2 s)."""
    if name in __all__:
        from kernelloop.report import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
