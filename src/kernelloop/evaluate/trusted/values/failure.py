"""What a judged call can end in besides a pass: a failure charged to the candidate (its
category and reason) or a fault of the task itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Failure:
    category: str
    reason: str


class TaskFault(Exception):
    """The task's own inputs or reference failed on a call (never the candidate's doing:
    both run here, on inputs from the trusted seeds)."""
