"""Stop and resume a sandboxed worker with everything it started (SIGSTOP / SIGCONT).

While one implementation is timed, every other worker is stopped, so a candidate cannot
run host code (a busy thread, a child process, a late kernel launch) during the best's
turn. The sandbox's first process (bubblewrap, `unshare` or the worker itself) is the
root; in a private pid namespace every process the candidate starts — new sessions and
double forks included — is re-parented inside the namespace, so it stays a descendant
of that root. Descendants are found through /proc/<pid>/task/<tid>/children (a full
/proc scan where the kernel lacks that file). The walk repeats until it finds no process
it has not stopped (a process caught mid-fork shows its child on the next walk), then
waits until each is really stopped. Without a pid namespace (sandbox mode "none"),
processes carrying the sandbox's marker in their environment are stopped too; an
`env -i` child escapes that, as it escapes the kill at the end (the mode warns).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_HAS_CHILDREN = Path("/proc/self/task").is_dir() and any(
    (p / "children").exists() for p in Path("/proc/self/task").iterdir()
)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:  # noqa: PTH123
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def _ppids() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:  # noqa: PTH123
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(root: int) -> list[int]:
    """`root` and all its live descendants."""
    kids = None if _HAS_CHILDREN else _ppids()
    out, i = [root], 0
    while i < len(out):
        pid = out[i]
        i += 1
        out += [c for c in (_children(pid) if kids is None else kids.get(pid, [])) if c not in out]
    return out


def marked(marker: str) -> list[int]:
    """Processes whose environment carries `KERNELLOOP_SANDBOX_ID=<marker>`."""
    needle = f"KERNELLOOP_SANDBOX_ID={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:  # noqa: PTH123
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _state(pid: int, tid: str | None = None) -> str | None:
    """The state letter of process `pid` (its leader), or of its thread `tid`."""
    stat = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(stat) as f:  # noqa: PTH123
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None  # gone


_HALTED = (None, "T", "t", "Z", "X")


def _halted(pid: int) -> bool:
    """Every thread of `pid` stopped (or gone): /proc/<pid>/stat shows the thread-group
    leader only, and a busy thread on another CPU takes its stop a moment later."""
    if _state(pid) not in _HALTED:
        return False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    return all(_state(pid, tid) in _HALTED for tid in tids)


def run_queue_wait_ns(pids: list[int]) -> int:
    """Nanoseconds the threads of `pids` spent runnable but waiting for a CPU (the kernel's
    schedstat, second field, summed over every thread); 0 where the kernel keeps none."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:  # noqa: PTH123
                    total += int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return total


class Freezer:
    """SIGSTOP/SIGCONT for one sandbox's process tree."""

    def __init__(self, root: int, marker: str | None = None) -> None:
        self.root, self.marker = root, marker
        self.stopped: list[int] = []

    def _members(self) -> list[int]:
        pids = tree(self.root)
        if self.marker:
            pids += [p for p in marked(self.marker) if p not in pids]
        return pids

    def stop(self, settle_s: float = 5.0) -> bool:
        """Stop every process of the sandbox; False if some would not stop in `settle_s`."""
        seen: set[int] = set()
        deadline = time.monotonic() + settle_s
        while True:
            new = [p for p in self._members() if p not in seen]
            if not new:
                break
            for pid in new:
                seen.add(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    continue
            while time.monotonic() < deadline and not all(_halted(p) for p in new):
                time.sleep(0.0002)
            if time.monotonic() >= deadline:
                self.stopped = sorted(seen)
                return False
        self.stopped = sorted(seen)
        return True

    def waited_ns(self) -> int:
        """Run-queue wait so far of the processes `stop` stopped (read while they are
        stopped: between turns, nothing of theirs runs or waits)."""
        return run_queue_wait_ns(self.stopped)

    def cont(self) -> None:
        """Resume what `stop` stopped (stopped processes cannot have started anything)."""
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                continue
        self.stopped = []

    def kill(self) -> None:
        for pid in self._members():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
