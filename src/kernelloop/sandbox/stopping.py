"""Stopping every sandboxed worker of this process at once (Ctrl-C).

Workers run in sessions of their own (`start_new_session`), so a terminal's Ctrl-C reaches
only the launcher. Without this, the launcher's KeyboardInterrupt unwound into
`SandboxProcess.finish()`, which waits up to the worker's whole timeout for it to exit: a
run took 2 min 09 s to stop (issue 36). Once `STOPPING` is set, no worker starts, none is
waited for, and every live one's process group is killed.
"""

from __future__ import annotations

import os
import signal
import threading

STOPPING = threading.Event()
_live: set[int] = set()  # process-group leaders of the workers now running
_lock = threading.Lock()


class Stopping(KeyboardInterrupt):
    """Raised where a worker would start after the stop was asked for."""


def started(pid: int) -> None:
    with _lock:
        _live.add(pid)
    if STOPPING.is_set():  # raced with the stop: this one is killed too
        _kill(pid)


def ended(pid: int) -> None:
    with _lock:
        _live.discard(pid)


def refuse_if_stopping() -> None:
    if STOPPING.is_set():
        raise Stopping("stopping: no new worker starts")


def stop_all() -> int:
    """Ask every worker of this process to stop now: set `STOPPING` and kill each live
    worker's process group (each worker's own `finish()` still reaps it and its escapees).
    Returns how many were running."""
    STOPPING.set()
    with _lock:
        pids = list(_live)
    for pid in pids:
        _kill(pid)
    return len(pids)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
