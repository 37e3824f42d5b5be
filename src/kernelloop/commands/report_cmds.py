"""`kernelloop report TASK`: the reviewer's report of a run, as Markdown and HTML;
`kernelloop report --suite OUT` (or a suite's OUT folder as TASK): the report of a
`kernelloop suite` run (issue #17)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelloop.commands.common import WorkspaceOpt, open_history
from kernelloop.errors import KernelloopError


def report(
    task_dir: Annotated[
        Path | None,
        typer.Argument(
            metavar="TASK", help="task folder (with task.toml), or a suite's --out folder"
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
    run: Annotated[
        int | None, typer.Option("--run", min=1, help="Report this run id (default: the latest).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Output folder (default: the workspace's reports/run-N; with --suite, OUT).",
        ),
    ] = None,
    suite: Annotated[
        Path | None,
        typer.Option(
            "--suite",
            help="The --out folder of `kernelloop suite`: the suite's report (leaderboard, "
            "fast_p, each task's report linked, failures called out).",
        ),
    ] = None,
) -> None:
    """Write report.md (with PNG charts) and a self-contained report.html for a run, or for
    a suite with --suite OUT."""
    from kernelloop.report.leaderboard import is_suite

    if suite is not None and task_dir is not None:
        raise KernelloopError(
            f"pass a task folder or --suite OUT, not both; drop {task_dir} or --suite."
        )
    if suite is None and task_dir is not None and is_suite(task_dir):
        suite = task_dir
    if suite is not None:
        if run is not None or workspace is not None:
            raise KernelloopError(
                "--run and --workspace pick one task's run; leave them out with --suite "
                "(the suite recorded each task's run)."
            )
        _suite_report(suite, out)
        return
    if task_dir is None:
        raise KernelloopError(
            "pass a task folder, or --suite OUT for the report of a `kernelloop suite` run."
        )
    task, store = open_history(task_dir, workspace)
    # matplotlib (~0.9 s) loads only once the arguments are known good.
    from kernelloop.report import write_report
    from kernelloop.report.render import default_folder

    with store:
        runs = store.runs(task.name)
        if not runs:
            raise KernelloopError(
                f"the history of task {task.name} has no run yet; run `kernelloop run {task_dir}` "
                "first."
            )
        run_id = run if run is not None else runs[-1].id
        folder = out.expanduser().resolve() if out else default_folder(store.path.parent, run_id)
        _not_a_file(folder)
        files = write_report(
            store, task.name, task.spec.rules, folder, run_id=run_id, repro=_repro(task, task_dir)
        )
    typer.echo(f"report of {task.name} run {run_id} written to {folder}")
    typer.echo(f"  {files.html}")
    typer.echo(f"  {files.markdown} (charts: {', '.join(p.name for p in files.charts)})")


def _repro(task, task_dir: Path):
    """How the report's commands fetch and evaluate a proposal again: this CLI as it was
    started, the task folder as given, the variants' git repository and kernel path."""
    import shlex

    from kernelloop.commands.interrupt import invocation
    from kernelloop.report.review import Repro
    from kernelloop.versions import Versions

    versions = Versions.open(task.folder, task.name, task.spec.task.baseline)
    return Repro(
        cli=shlex.join(invocation()),
        task=str(task_dir),
        repo=str(versions.repo),
        kernel_path=versions.kernel_path,
    )


def _suite_report(suite: Path, out: Path | None) -> None:
    from kernelloop.report.suite import write_suite_report

    suite = suite.expanduser().resolve()
    folder = out.expanduser().resolve() if out else suite
    _not_a_file(folder)
    files = write_suite_report(suite, folder)
    typer.echo(f"report of the suite in {suite} written to {folder}")
    typer.echo(f"  {files.html}")
    typer.echo(f"  {files.markdown}")


def _not_a_file(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise KernelloopError(f"{folder} is a file, not a folder; pass --out with a folder path.")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
