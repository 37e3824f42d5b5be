"""Races on purpose: one function run by many threads at once, with the interpreter
switching threads every microsecond (tests/test_pyast.py, tests/task/test_global_rng.py)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


def all_at_once(work: Callable[[int], None], threads: int) -> None:
    """`work(0)` … `work(threads - 1)`, each in its own thread, started together and
    joined; the switch interval is 1 µs meanwhile and restored after."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        sys.setswitchinterval(old)
