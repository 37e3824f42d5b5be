"""`kernelloop report TASK`: the reviewer's report of a run, as Markdown and HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelloop.commands.common import TaskArg, WorkspaceOpt, open_history
from kernelloop.errors import KernelloopError


def report(
    task_dir: TaskArg,
    workspace: WorkspaceOpt = None,
    run: Annotated[
        int | None, typer.Option("--run", help="Report this run id (default: the latest).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: the workspace's reports/run-N)."),
    ] = None,
) -> None:
    """Write report.md (with PNG charts) and a self-contained report.html for a run."""
    from kernelloop.report import write_report  # matplotlib loads only for this command

    task, store = open_history(task_dir, workspace)
    with store:
        runs = store.runs(task.name)
        if not runs:
            raise KernelloopError(
                f"the history of task {task.name} has no run yet; run `kernelloop run {task_dir}` "
                "first."
            )
        run_id = run if run is not None else runs[-1].id
        folder = (
            out.expanduser().resolve() if out else store.path.parent / "reports" / f"run-{run_id}"
        )
        if folder.exists() and not folder.is_dir():
            raise KernelloopError(
                f"{folder} is a file, not a folder; pass --out with a folder path."
            )
        files = write_report(store, task.name, task.spec.rules, folder, run_id=run_id)
    typer.echo(f"report of {task.name} run {run_id} written to {folder}")
    typer.echo(f"  {files.html}")
    typer.echo(f"  {files.markdown} (charts: {', '.join(p.name for p in files.charts)})")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
