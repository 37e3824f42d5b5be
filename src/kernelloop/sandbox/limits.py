"""Resource limits on the sandbox: a cgroup of its own where one can be made, rlimits.

Processes. RLIMIT_NPROC does not bound a sandbox launched by root: bwrap maps the
sandbox's uid to the caller's, the kernel charges the tasks to kuid 0, and it never
enforces RLIMIT_NPROC on kuid 0 (measured: 200 forks under a limit of 50). So:
- a cgroup with `pids.max` (cgroup v2 where an ancestor delegates `pids`, else the v1
  `pids` hierarchy), made under the launcher's own cgroup so that every limit on it
  still applies; the sandbox's first process joins it before exec, so everything it
  starts is counted, and the cgroup is emptied (SIGKILL) and removed at the end;
- else, for a non-root launcher, RLIMIT_NPROC at the user's current task count plus the
  budget (the kernel counts every task of that uid against it, so it is approximate);
- else nothing, and the result says so in `limits` and `warnings`.
Memory. The same cgroup's memory controller caps the sandbox (tmpfs pages included),
where it is available; never RLIMIT_AS, which breaks CUDA.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

_MOUNTINFO = Path("/proc/self/mountinfo")
_CGROUP = Path("/proc/self/cgroup")


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root, fstype, super options) of every cgroup mount."""
    out = []
    try:
        lines = _MOUNTINFO.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) >= 5 and len(r) >= 3 and r[0] in ("cgroup", "cgroup2"):
            out.append((f[4].replace("\\040", " "), f[3], r[0], set(r[2].split(","))))
    return out


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    try:
        lines = _CGROUP.read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            own[c] = path
    return own


def _host_dir(mount: str, root: str, path: str) -> Path | None:
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    rel = path[len(root) :] if root != "/" else path
    return Path(mount) / rel.lstrip("/")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@dataclass
class Cgroup:
    """One sandbox's cgroup directories (one on v2, one per controller on v1)."""

    dirs: list[Path] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    _fds: list[int] = field(default_factory=list)

    @classmethod
    def create(cls, name: str, max_tasks: int, max_memory: int) -> Cgroup:
        cg = cls()
        wanted = {"pids": max_tasks, **({"memory": max_memory} if max_memory else {})}
        mounts, own = _mounts(), _own_cgroups()
        v2 = next(((m, r) for m, r, t, _ in mounts if t == "cgroup2"), None)
        if v2 is not None and "" in own:
            cg._try_v2(v2, own[""], name, wanted)
        for ctrl, value in wanted.items():
            if ctrl in cg.notes:
                continue
            v1 = next(((m, r) for m, r, t, o in mounts if t == "cgroup" and ctrl in o), None)
            if v1 is not None and ctrl in own:
                cg._try_v1(v1, own[ctrl], ctrl, name, value)
        return cg

    def _try_v2(self, mount: tuple[str, str], own: str, name: str, wanted: dict[str, int]) -> None:
        here = _host_dir(*mount, own)
        if here is None:
            return
        top = Path(mount[0])
        # The nearest cgroup (ours or an ancestor) that already hands `pids` to its
        # children: a child made there stays under every limit set above it.
        for parent in [here, *here.parents]:
            if not parent.is_relative_to(top):
                break
            try:
                delegated = set((parent / "cgroup.subtree_control").read_text().split())
            except OSError:
                continue
            if "pids" not in delegated:
                continue
            d = parent / f"kernelloop-{name}"
            try:
                d.mkdir()
                _write(d / "pids.max", str(wanted["pids"]))
                self.notes["pids"] = f"cgroup v2 pids.max={wanted['pids']}"
                if "memory" in wanted and "memory" in delegated:
                    _write(d / "memory.max", str(wanted["memory"]))
                    with contextlib.suppress(OSError):
                        _write(d / "memory.swap.max", "0")
                    self.notes["memory"] = f"cgroup v2 memory.max={wanted['memory']}"
                self._add(d)
            except OSError:
                self._remove_dir(d)
            return

    def _try_v1(self, mount: tuple[str, str], own: str, ctrl: str, name: str, value: int) -> None:
        here = _host_dir(*mount, own)
        if here is None:
            return
        d = here / f"kernelloop-{name}"
        knob = "pids.max" if ctrl == "pids" else "memory.limit_in_bytes"
        try:
            d.mkdir()
            _write(d / knob, str(value))
            self._add(d)
            self.notes[ctrl] = f"cgroup v1 {knob}={value}"
        except OSError:
            self._remove_dir(d)

    def _add(self, d: Path) -> None:
        self._fds.append(os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        self.dirs.append(d)

    def join(self) -> None:
        """Move the calling process in (called in the child, before exec)."""
        pid = str(os.getpid()).encode()
        for fd in self._fds:
            os.write(fd, pid)

    def close_fds(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []

    def members(self) -> set[int]:
        pids: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return pids

    def destroy(self, wait_s: float = 10.0) -> int:
        """SIGKILL everything still in the cgroup, then remove it; returns how many were killed."""
        self.close_fds()
        killed: set[int] = set()
        deadline = time.monotonic() + wait_s
        while self.dirs:
            left = self.members()
            for pid in left - killed:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            for d in list(self.dirs):
                if not left or time.monotonic() > deadline:
                    self._remove_dir(d)
                    if not d.exists():
                        self.dirs.remove(d)
            if self.dirs and time.monotonic() > deadline:
                break  # a process stuck in the kernel (D state): leave the empty-able dir
            time.sleep(0.02)
        return len(killed)

    @staticmethod
    def _remove_dir(d: Path) -> None:
        with contextlib.suppress(OSError):
            d.rmdir()


def user_task_count(uid: int) -> int:
    """Tasks (threads) of `uid` visible here: what RLIMIT_NPROC is charged against."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        try:
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields.get("Threads", "1"))
        except (KeyError, ValueError, IndexError):
            continue
    return total


def default_memory_cap() -> int:
    """3/4 of the machine's memory."""
    try:
        kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
    except (OSError, StopIteration, ValueError):
        return 0
    return kb * 1024 * 3 // 4


def rlimits(max_file: int, max_open: int, nproc: int | None) -> list[tuple[int, tuple[int, int]]]:
    out = [
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_FSIZE, (max_file, max_file)),
        (resource.RLIMIT_NOFILE, (max_open, max_open)),
    ]
    if nproc is not None:
        out.append((resource.RLIMIT_NPROC, (nproc, nproc)))
    return out
