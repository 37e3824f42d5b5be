"""Worker-side tripwires for a candidate that reaches into the harness (untrusted side).

The static screen keeps candidates away from harness state; these catch what an AST
cannot see (an indirection it missed) after the fact. Like every worker fact they can
only reject: a candidate that defeats them still faces the trusted side's own checks.
- `Integrity`: the identity of every function and class the harness calls, taken before
  the candidate is imported and compared after its import and after every call
  (monkeypatched timers, torch functions, checkers, the channel's writer);
- `new_threads`: Python threads still running after a call returned (deferred work);
- `stray_processes`: processes the candidate started that are still alive at the end.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import threading
import time
import types

import torch

TORCH_NAMES = (
    "empty",
    "empty_like",
    "equal",
    "Tensor",
    "Generator",
    "from_numpy",
    "isfinite",
    "cuda",
)
TENSOR_NAMES = (
    "clone",
    "contiguous",
    "view",
    "reshape",
    "detach",
    "cpu",
    "numpy",
    "untyped_storage",
    "is_contiguous",
    "numel",
    "element_size",
    "data_ptr",
    "to",
    "copy_",
    "fill_",
    "__eq__",
    "shape",
    "dtype",
    "device",
)
CUDA_NAMES = (
    "synchronize",
    "Event",
    "Stream",
    "current_stream",
    "is_available",
    "_sleep",
    "CUDAGraph",
    "graph",
)
EVENT_NAMES = ("record", "elapsed_time", "synchronize", "query")
TIME_NAMES = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "sleep")
OS_NAMES = (
    "replace",
    "write",
    "dup",
    "dup2",
    "fdopen",
    "_exit",
    "kill",
    "getpid",
    "listdir",
    "readlink",
)
BUILTIN_NAMES = (
    "open",
    "isinstance",
    "type",
    "len",
    "getattr",
    "print",
    "__import__",
    "sorted",
    "sum",
    "id",
)


def _callables(ns: dict) -> dict[str, object]:
    return {k: v for k, v in ns.items() if callable(v) and not isinstance(v, types.ModuleType)}


class Integrity:
    """Identities of what the harness relies on, compared by `is` (cheap: ~1k lookups)."""

    def __init__(self, harness_modules: list[types.ModuleType]) -> None:
        self._probes: list[tuple[str, object, str]] = []  # (label, owner, attribute)
        for owner, names, label in (
            (torch, TORCH_NAMES, "torch"),
            (torch.Tensor, TENSOR_NAMES, "torch.Tensor"),
            (torch.cuda, CUDA_NAMES, "torch.cuda"),
            (torch.cuda.Event, EVENT_NAMES, "torch.cuda.Event"),
            (time, TIME_NAMES, "time"),
            (os, OS_NAMES, "os"),
            (json, ("dumps", "loads"), "json"),
            (builtins, BUILTIN_NAMES, "builtins"),
        ):
            for n in names:
                if hasattr(owner, n):
                    self._probes.append((f"{label}.{n}", owner, n))
        for mod in harness_modules:
            for n, v in _callables(vars(mod)).items():
                self._probes.append((f"{mod.__name__}.{n}", mod, n))
                if isinstance(v, type) and v.__module__ == mod.__name__:
                    for m in _callables(vars(v)):
                        self._probes.append((f"{mod.__name__}.{n}.{m}", v, m))
        self._expected = [getattr(owner, n) for _, owner, n in self._probes]

    def changed(self) -> list[str]:
        """Labels of everything rebound or removed since the snapshot."""
        out = []
        for (label, owner, n), want in zip(self._probes, self._expected, strict=True):
            if getattr(owner, n, None) is not want:
                out.append(label)
        return out


def thread_baseline() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def new_threads(baseline: set[int]) -> list[str]:
    """Names of live Python threads that did not exist before the candidate was imported."""
    return [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in baseline]


def _stat(pid: str) -> tuple[str, int] | None:
    try:
        text = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 - one short read
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0], int(fields[1])  # state, ppid


def _cmdline(pid: str) -> str:
    try:
        return (
            open(f"/proc/{pid}/cmdline", "rb")
            .read()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()
        )
    except OSError:
        return "?"


def stray_processes(private_pid_namespace: bool, marker: str | None) -> list[str]:
    """Processes other than this one and its ancestors that are still running.

    In the sandbox's own pid namespace every other visible process is the candidate's
    (sessions and double forks included). Without one, only processes that carry this
    evaluation's environment marker can be told apart (`env -i` hides a child from this
    check; the trusted side's kill by marker misses it too; the no-sandbox mode warns).
    """
    mine = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        st = _stat(str(pid))
        if st is None:
            break
        pid = st[1]
        mine.add(pid)
    needle = marker.encode() if marker else None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        st = _stat(entry)
        if st is None or st[0] in ("Z", "X"):
            continue  # gone, or a zombie waiting to be reaped: not running
        if not private_pid_namespace:
            try:
                env = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            if needle is None or needle not in env:
                continue
        found.append(f"pid {entry}: {_cmdline(entry)[:120]}")
    return found


def drop_cwd_from_path() -> None:
    """`python -m` puts the working directory first on sys.path; the candidate can write
    there, so a file like `numpy.py` would shadow a module imported later."""
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
