"""The reviewer's report of a run: per-round chart, roofline position, per-shape table,
claims vs measurements, metric deltas, cost ledger and a review checklist, as Markdown
(with PNG charts beside it) and as one self-contained HTML file."""

from kernelloop.report.render import ReportFiles, write_report

__all__ = ["ReportFiles", "write_report"]
