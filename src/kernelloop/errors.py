"""Errors a user sees: one sentence that says what is wrong and how to fix it.

The CLI prints these without a traceback and exits 2; anything else is a bug.
"""


class KernelloopError(Exception):
    """A usage or setup problem the user can fix (exit code 2)."""


class TaskError(KernelloopError):
    """The task folder or its task.toml is invalid."""


class SandboxError(KernelloopError):
    """The sandbox could not be started."""
