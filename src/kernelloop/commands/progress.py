"""Progress of long commands on stderr: a spinner with the current step on a terminal; off
a terminal (a log file, CI, a device script) one timestamped line per new step, so a run cut
by a time limit still says how far it got and where the time went."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape


@contextmanager
def progress_lines(err: Console, first: str) -> Iterator[Callable[[str], None]]:
    """Yields `say(message)`. On a terminal it updates one status line; otherwise it prints
    `[  12.3 s] message` to `err` whenever the message changes (repeats are dropped)."""
    if err.is_terminal:
        with err.status(escape(first)) as status:
            yield lambda m: status.update(escape(m))
        return
    start = time.monotonic()
    last: list[str] = []

    def say(message: str) -> None:
        if last and last[0] == message:
            return
        last[:] = [message]
        err.print(
            f"[{time.monotonic() - start:7.1f} s] {escape(message)}",
            soft_wrap=True,
            highlight=False,
        )

    say(first)
    yield say
