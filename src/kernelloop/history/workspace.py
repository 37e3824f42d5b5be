"""The task's workspace (`kernelloop.task.workspace_path`) made ready: the folder with its
own `.gitignore`, the history database in it, and the task's git versions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernelloop.history.store import HistoryStore
from kernelloop.task.workspace import workspace_path
from kernelloop.versions import Versions

if TYPE_CHECKING:
    from kernelloop.task import Task

DB_NAME = "history.sqlite"


def workspace_dir(task_folder: str | Path, override: str | Path | None = None) -> Path:
    """Create (if needed) and return the workspace folder.

    The folder carries its own `.gitignore` of `*`, so it stays out of the user's commits
    without touching their `.gitignore`.
    """
    ws = workspace_path(task_folder, override)
    ws.mkdir(parents=True, exist_ok=True)
    ignore = ws / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# kernelloop workspace: loop state, never committed\n*\n")
    return ws


def history_path(task_folder: str | Path, override: str | Path | None = None) -> Path:
    return workspace_dir(task_folder, override) / DB_NAME


def open_task_memory(
    task: Task, workspace: str | Path | None = None
) -> tuple[HistoryStore, Versions]:
    """The loop's two memories of a task: its history database and its kernel's git versions."""
    store = HistoryStore.open(history_path(task.folder, workspace))
    return store, Versions.open(task.folder, task.name, task.spec.task.baseline)
