"""Ctrl-C for the long commands: the first stops the work within seconds (every sandboxed
worker killed, the command's own cleanup and records run), a second exits at once (130).

Before this, a Ctrl-C during an evaluation waited for the worker's whole timeout (2 min
09 s measured, issue 36) and a second one left no hint of how to resume.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from kernelloop.sandbox import stopping

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a Ctrl-C'd program


def install() -> None:
    """Take over SIGINT for this process (call once, from the command's main thread)."""
    signal.signal(signal.SIGINT, _on_sigint)


def _on_sigint(signum: int, frame: object) -> None:
    if stopping.STOPPING.is_set():  # the second Ctrl-C: out now, workers killed on the way
        stopping.stop_all()
        os.write(2, b"\ninterrupted again: exiting now\n")
        os._exit(EXIT_INTERRUPTED)
    stopping.stop_all()
    os.write(2, b"\nstopping: ending the workers (Ctrl-C again to exit at once)\n")
    raise KeyboardInterrupt


def exit_interrupted() -> NoReturn:
    """End a command that a Ctrl-C stopped, once its records are written and said: the exit
    handlers run with `_on_sigint` still installed, then the process ends with 130 without
    the interpreter's own shutdown. That shutdown's last step puts back the default SIGINT
    action, so a second Ctrl-C landing there ended the process with -2 and no word (CI,
    2026-12-07) instead of "interrupted again"."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    atexit._run_exitfuncs()
    os._exit(EXIT_INTERRUPTED)


def invocation() -> list[str]:
    """How this kernelloop was started, as a command the user can paste: the script path
    as typed (`.venv/bin/kernelloop` after setup, where `kernelloop` alone is not on PATH),
    `PYTHON -m kernelloop` for the module form."""
    arg0 = sys.argv[0] if sys.argv and sys.argv[0] else "kernelloop"
    if arg0 == "-c" or arg0.endswith(".py"):
        return [_pasteable(sys.executable), "-m", "kernelloop"]
    return [_pasteable(arg0)]


def _pasteable(path: str) -> str:
    """`path` shortened to one relative to the current folder where it lies inside it."""
    p = Path(path)
    if not p.is_absolute():
        return path if "/" in path or not p.exists() else f"./{path}"
    try:
        rel = str(p.relative_to(Path.cwd()))
    except ValueError:
        return path
    return rel if "/" in rel else f"./{rel}"
