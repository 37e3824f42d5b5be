"""What several commands share: the task argument, the --workspace option, and opening a
task's existing history for reading."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.history.workspace import DB_NAME
from kernelloop.task import Task, load_task

TaskArg = Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")]
WorkspaceOpt = Annotated[
    Path | None,
    typer.Option("--workspace", help="Where the history lives (default: TASK/.kernelloop)."),
]


def open_history(task_dir: Path, workspace: Path | None) -> tuple[Task, HistoryStore]:
    """The task and its history store; a clear error (and nothing created) where no run
    has written one yet."""
    task = load_task(task_dir)
    ws = task.workspace(workspace)
    db = ws / DB_NAME
    if not db.is_file():
        raise KernelloopError(
            f"no history for task {task.name} in {ws}; run `kernelloop run {task_dir}` first "
            "or pass --workspace where the run wrote it."
        )
    return task, HistoryStore.open(db)
