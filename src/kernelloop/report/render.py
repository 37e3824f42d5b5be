"""Builds the report: records → sections → charts → report.md and a self-contained report.html."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from kernelloop.history import HistoryStore
from kernelloop.report import review, sections
from kernelloop.report.charts import STYLE, progress_chart, roofline_chart
from kernelloop.report.checklist import checklist
from kernelloop.report.records import RunRecords, read_run
from kernelloop.task import words
from kernelloop.task.spec import Rules

NONE = sections.NONE


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    charts: list[Path]


def _fmt(value: Any, spec: str = "", suffix: str = "") -> str:
    return NONE if value is None else f"{value:{spec}}{suffix}"


def _cell(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def default_folder(workspace: Path, run_id: int) -> Path:
    """Where `kernelloop report TASK` writes a run's report without --out."""
    return workspace / "reports" / f"run-{run_id}"


def template_env(autoescape: bool) -> Environment:
    """The report's Jinja environment (templates/*.j2): autoescaped for the HTML."""
    env = Environment(
        loader=PackageLoader("kernelloop.report", "templates"),
        undefined=StrictUndefined,
        autoescape=select_autoescape(enabled_extensions=("html.j2",)) if autoescape else False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(fmt=_fmt, cell=_cell)
    return env


def context(
    rr: RunRecords, rules: Rules, out_dir: Path, repro: review.Repro | None = None
) -> dict[str, Any]:
    """Everything the two templates show."""
    head = sections.header(rr, datetime.now(UTC).isoformat(timespec="seconds"))
    pts = sections.points(rr)
    rows = sections.shape_rows(rr)
    progress = progress_chart(pts, sections.best_so_far(rr), out_dir)
    roof = roofline_chart(rows, out_dir)
    best = rr.best
    best_stored = rr.stored.get(best.id) if best else None
    return {
        "h": head,
        "pending": best is not None and rr.pending_id == best.id,
        "points": pts,
        "style": STYLE,
        "rows": rows,
        "best": best,
        "best_bench": best_stored.bench if best_stored else None,
        "best_gate": best_stored.gate if best_stored else None,
        "has_floor": any(r["pct_of_floor"] is not None for r in rows),
        "has_compiled": any(
            r.get("compiled_ms") is not None or r.get("speedup_vs_compiled") is not None
            for r in rows
        ),
        "best_vs_compiled": (best_stored.bench or {}).get("speedup_vs_compiled")
        if best_stored
        else None,
        "narrative": sections.narrative(rr),
        "rounds": sections.rounds(rr),
        "deltas": sections.metric_deltas(rr),
        "costs": sections.cost_ledger(rr, head["wall_s"]),
        "checklist": checklist(rr, rules),
        "diffs": review.diffs(rr, rr.parent_source),
        "proposals": review.proposals(rr, repro),
        "interruptions": review.interruptions(rr),
        "charts": {c.name: c for c in (progress, roof) if c is not None},
        "counts": counts(rr),
    }


def counts(rr: RunRecords) -> dict[str, int]:
    """The run's proposals by outcome, in the one vocabulary (task/words.py): the header's
    "0 promoted, 2 judged correct, not timed, …", never "2 accepted" where nothing was."""
    outs = [a.outcome for a in rr.attempts if a.round > 0]
    return {
        "promoted": outs.count(words.PROMOTED),
        "not_promoted": outs.count(words.NOT_PROMOTED),
        "not_timed": outs.count(words.NOT_TIMED),
        "rejected": sum(o.startswith(words.REJECTED) for o in outs),
        "refused": outs.count(words.REFUSED),
        "infrastructure": outs.count(words.NOT_EVALUATED),
        "pending": outs.count(words.PENDING),
    }


def write_report(
    store: HistoryStore,
    task_name: str,
    rules: Rules,
    out_dir: Path,
    run_id: int | None = None,
    repro: review.Repro | None = None,
) -> ReportFiles:
    """Read one run (the latest by default) and write report.md, report.html and the PNG
    charts; `repro`: how to fetch and evaluate each proposal again (its command shown)."""
    rr = read_run(store, task_name, run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = context(rr, rules, out_dir, repro)
    md, html = out_dir / "report.md", out_dir / "report.html"
    md.write_text(template_env(False).get_template("report.md.j2").render(ctx), encoding="utf-8")
    html.write_text(template_env(True).get_template("report.html.j2").render(ctx), encoding="utf-8")
    return ReportFiles(md, html, [c.png for c in ctx["charts"].values()])
