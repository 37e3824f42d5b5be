"""Where a task's loop state lives: `<task folder>/.kernelloop/` unless the user says.

The one place the workspace's name and path are decided. It is part of no task's digest,
the sandbox hides it from candidates, and `kernelloop history`, `run`, `mcp` and `report`
all find the history there.
"""

from __future__ import annotations

from pathlib import Path

WORKSPACE_NAME = ".kernelloop"


def workspace_path(task_folder: str | Path, override: str | Path | None = None) -> Path:
    """The workspace folder of a task (the override if given), resolved; nothing is created."""
    if override:
        return Path(override).expanduser().resolve()
    return Path(task_folder).resolve() / WORKSPACE_NAME
