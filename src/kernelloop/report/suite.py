"""The suite's report (`kernelloop report --suite OUT`, issue #17): the leaderboard of a
`kernelloop suite` run as a reviewer reads it — totals, KernelBench's fast_p, the table
with a link to each task's own report, and every task that failed, never finished or
needs a look, with its reason — as report.md and a self-contained report.html, through
the per-task report's templates environment (render.template_env).

It reads OUT/leaderboard.json (required: its table and fast_p are shown as the suite
computed them, never recomputed) and OUT/suite.json where present (each task's folder
and run summary, and the tasks the leaderboard does not have yet). Both are read as plain
dicts: a leaderboard from an older kernelloop renders whatever fields it has.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kernelloop.errors import KernelloopError
from kernelloop.report.leaderboard import BOARD, STATE
from kernelloop.report.render import ReportFiles, default_folder, template_env
from kernelloop.task.workspace import workspace_path

AGAIN = "run the same `kernelloop suite` command again"
FAILED = frozenset({"error", "not run"})
UNFINISHED = frozenset(
    {"started", "interrupted"}
)  # suite.json: a task not done (Ctrl-C: interrupted)
UNDONE = (
    "the suite is running it now, or stopped while it ran (interrupted or crashed); if "
    f"nothing runs it, {AGAIN} to continue it"
)


def _json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise KernelloopError(
            f"{path} cannot be read as {what} ({type(e).__name__}); {AGAIN} to rewrite it."
        ) from None
    if not isinstance(data, dict):
        raise KernelloopError(f"{path} is not {what}; {AGAIN} to rewrite it.")
    return data


def read_suite(folder: Path) -> tuple[dict, dict]:
    """(leaderboard, suite state) of a suite's OUT folder; one sentence with the fix where
    the folder holds no leaderboard."""
    if not folder.is_dir():
        raise KernelloopError(
            f"{folder} is not a folder; pass --suite the --out folder of `kernelloop suite`."
        )
    state = _json(folder / STATE, "a suite's state") if (folder / STATE).is_file() else {}
    if not (folder / BOARD).is_file():
        if state:
            done = sum(
                1 for e in state.values() if isinstance(e, dict) and e.get("status") == "done"
            )
            raise KernelloopError(
                f"{folder} has no {BOARD} yet: its suite has not finished ({done} of "
                f"{len(state)} task(s) done in {STATE}); {AGAIN} to finish it."
            )
        raise KernelloopError(
            f"{folder} has no {BOARD}; run `kernelloop suite TASK… --out {folder}` first, "
            "or pass --suite the folder it wrote."
        )
    board = _json(folder / BOARD, "a leaderboard")
    if not isinstance(board.get("tasks"), list):
        raise KernelloopError(f"{folder / BOARD} lists no tasks; {AGAIN} to rewrite it.")
    return board, state


def _href(path: Path, dest: Path) -> str:
    """A link from the report's folder to `path` (relative, so the tree can move)."""
    return quote(os.path.relpath(path, dest))


def _own_report(row: dict, folder: str, dest: Path) -> dict[str, str]:
    """Where the task's own report of its run is (links from `dest`), or else the command
    that writes it; all empty without a run."""
    found = {"html": "", "md": "", "command": ""}
    run_id = row.get("run_id")
    if not folder or run_id is None:
        return found
    where = default_folder(workspace_path(folder), int(run_id))
    if (where / "report.html").is_file():
        html, md = where / "report.html", where / "report.md"
        return found | {"html": _href(html, dest), "md": _href(md, dest)}
    return found | {"command": f"kernelloop report {folder} --run {run_id}"}


def _infrastructure(summary: dict) -> tuple[int, str]:
    """How many of the run's proposals were lost to infrastructure failures, and the first
    one's reason."""
    lost = [a for a in summary.get("attempts") or [] if a.get("status") == "infrastructure"]
    return len(lost), (lost[0].get("infra_reason") or "") if lost else ""


def _attention(row: dict, entry: dict, reason: str, infra: tuple[int, str]) -> list[str]:
    """Why a task in the leaderboard needs a look, one sentence each."""
    status = row.get("status", "?")
    said = []
    if status == "error":
        said.append(f"failed: {row.get('error') or 'no reason recorded'}")
    elif status == "not run":
        said.append(f"never ran; {AGAIN} to run it")
    if entry.get("status") in UNFINISHED:
        said.append(f"started again after this leaderboard was written and not finished: {UNDONE}")
    if status not in FAILED:
        if status == "needs review":
            said.append(f"the run asks for review: {reason or 'no reason recorded'}")
        if not row.get("correct"):
            said.append(
                "no candidate other than the baseline passed every correctness check"
                + (f" (the run ended: {reason})" if reason else "")
            )
    if infra[0]:
        said.append(
            f"{infra[0]} proposal(s) lost to infrastructure failures, never judged (first: "
            f"{infra[1] or 'no reason recorded'})"
        )
    return said


def _unlisted(state: dict, listed: set[str]) -> list[dict[str, Any]]:
    """Tasks of suite.json that the leaderboard does not have."""
    out = []
    for name, entry in state.items():
        if name in listed or not isinstance(entry, dict):
            continue
        if entry.get("status") in UNFINISHED:
            why = f"never finished: {UNDONE}"
        else:
            why = (
                f"finished after {BOARD} was written, so it is in neither the table nor fast_p; "
                f"{AGAIN} to write the leaderboard again"
            )
        out.append({"task": name, "reasons": [why], "folder": entry.get("folder", "")})
    return out


def context(folder: Path, board: dict, state: dict, dest: Path) -> dict[str, Any]:
    """Everything the two suite templates show."""
    rows, attention = [], []
    for row in board["tasks"]:
        name = str(row.get("task", "?"))
        entry = state.get(name) if isinstance(state.get(name), dict) else {}
        summary = entry.get("summary") or {}
        task_folder = row.get("folder") or entry.get("folder") or ""
        reason = row.get("reason") or summary.get("reason") or ""
        wall = row.get("wall_s", summary.get("wall_s"))
        infra = _infrastructure(summary)
        rows.append(
            {
                "task": name,
                "status": row.get("status", "?"),
                "correct": bool(row.get("correct")),
                "speedup": row.get("speedup"),
                "speedup_vs_compiled": row.get("speedup_vs_compiled"),
                "timings_count": bool(row.get("timings_count")),
                "pct_of_floor": row.get("pct_of_floor"),
                "rounds": row.get("rounds", 0),
                "cost_usd": float(row.get("cost_usd") or 0.0),
                "wall_s": wall,
                "run_id": row.get("run_id"),
                "folder": task_folder,
                "report": _own_report(row, task_folder, dest),
            }
        )
        if said := _attention(row, entry, reason, infra):
            attention.append({"task": name, "reasons": said, "folder": task_folder})
    unlisted = _unlisted(state, {r["task"] for r in rows})
    attention += unlisted
    n = len(rows)
    walls = [r["wall_s"] for r in rows if r["wall_s"] is not None]
    fast = board.get("fast_p") or {}
    return {
        "suite": str(folder),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "board_written": datetime.fromtimestamp((folder / BOARD).stat().st_mtime, UTC).isoformat(
            timespec="seconds"
        ),
        "rows": rows,
        "attention": attention,
        "fast_p": [
            {"p": key.removeprefix("fast_"), "fraction": float(v), "count": round(float(v) * n)}
            for key, v in fast.items()
        ],
        "totals": {
            "tasks": n,
            "finished": sum(r["status"] not in FAILED for r in rows),
            "failed": sum(r["status"] in FAILED for r in rows),
            "unlisted": len(unlisted),
            "correct": sum(r["correct"] for r in rows),
            "measured": sum(r["timings_count"] for r in rows),
            "rounds": sum(int(r["rounds"] or 0) for r in rows),
            "cost_usd": sum(r["cost_usd"] for r in rows),
            "wall_s": sum(walls) if walls else None,
            "wall_unknown": n - len(walls),
            "reports": sum(bool(r["report"].get("html")) for r in rows),
        },
    }


def write_suite_report(folder: Path, dest: Path) -> ReportFiles:
    """Read the suite in `folder` and write report.md and report.html into `dest`."""
    board, state = read_suite(folder)
    dest.mkdir(parents=True, exist_ok=True)
    ctx = context(folder, board, state, dest)
    md, html = dest / "report.md", dest / "report.html"
    md.write_text(template_env(False).get_template("suite.md.j2").render(ctx), encoding="utf-8")
    html.write_text(template_env(True).get_template("suite.html.j2").render(ctx), encoding="utf-8")
    return ReportFiles(md, html, [])
