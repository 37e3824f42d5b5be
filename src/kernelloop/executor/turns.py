"""Turns on one device within this process: evaluations share it, timings have it alone.

Several jobs may run on one device at once only where the device is this machine's CPU
(`--jobs N`): their correctness workers then run side by side. A timing must not: another
job's worker would take the cores it measures. So a job checks correctness in a shared
turn and benchmarks in an exclusive one; an exclusive turn waits for the shared turns in
progress to end and keeps new ones waiting (writers first, so timings are never starved).
On a GPU each slot is its own device, so its turns never wait; the rule still holds if two
slots ever named one GPU.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Turns:
    """A readers-writer lock with writer preference."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting = 0  # exclusive turns asked for, not yet had

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and not self._sharing)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


_lock = threading.Lock()
_devices: dict[str, Turns] = {}


def of_device(key: str) -> Turns:
    """The turns of one device of this process ("cpu", "gpu0", …)."""
    with _lock:
        return _devices.setdefault(key, Turns())
