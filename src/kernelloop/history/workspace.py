"""Where a task's loop state lives: `<task folder>/.kernelloop/` unless the user says."""

from __future__ import annotations

from pathlib import Path

DB_NAME = "history.sqlite"


def workspace_dir(task_folder: str | Path, override: str | Path | None = None) -> Path:
    """Create (if needed) and return the workspace folder.

    The folder carries its own `.gitignore` of `*`, so it stays out of the user's commits
    without touching their `.gitignore`.
    """
    ws = Path(override).expanduser().resolve() if override else Path(task_folder).resolve() / ".kernelloop"
    ws.mkdir(parents=True, exist_ok=True)
    ignore = ws / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# kernelloop workspace: loop state, never committed\n*\n")
    return ws


def history_path(task_folder: str | Path, override: str | Path | None = None) -> Path:
    return workspace_dir(task_folder, override) / DB_NAME
