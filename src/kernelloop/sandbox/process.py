"""A running sandboxed worker: its launch, its bounded channel and stderr, its end.

In every mode the worker's process group is killed at the end, every process still
carrying this sandbox's marker in its environment is hunted down and killed, and the
sandbox's cgroup (where one could be made) is emptied with SIGKILL and removed.
"""

from __future__ import annotations

import ctypes
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from kernelloop.sandbox import limits as lim
from kernelloop.sandbox import mounts, stopping
from kernelloop.sandbox.bwrap import SANDBOX_UID, detect_mode
from kernelloop.sandbox.bwrap_argv import bwrap_command
from kernelloop.sandbox.config import (
    MARKER,
    SandboxConfig,
    SandboxResult,
    scrubbed_env,
)

# Loaded before any fork: the child only calls through it (no loading between fork and exec).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def kill_marked(marker: str) -> int:
    """Kill every process whose environment carries this sandbox's marker (escapees)."""
    needle = f"{MARKER}={marker}".encode()
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


def _preexec(rlimits: list, cgroup: lim.Cgroup):
    parent = os.getpid()

    def apply() -> None:
        # No RLIMIT_AS: CUDA reserves huge virtual ranges and fails under it.
        for which, value in rlimits:
            resource.setrlimit(which, value)
        cgroup.join()  # before exec: everything the sandbox starts is counted
        # Die with the loop: if the launcher is SIGKILLed, the sandbox's first process
        # (bwrap or the bare worker) is killed too; bwrap's --die-with-parent carries that
        # inwards. The parent check covers a launcher that died before the prctl.
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)

    return apply


class SandboxProcess:
    """A running sandboxed worker whose stdout is a line channel read as it arrives."""

    def __init__(
        self,
        argv: list[str],
        workdir: Path,
        cfg: SandboxConfig,
        stdin: bytes | None = b"",
        keep_fds: tuple[int, ...] = (),
    ) -> None:
        """`stdin`: the job, written as the worker starts; None: later, by `feed` (a worker
        started before its job exists: it imports what it needs, then waits on stdin).
        `keep_fds`: descriptors the worker inherits under the same numbers (the caller's
        own copies stay the caller's to close)."""
        self.cfg = cfg
        self.mode = detect_mode(cfg.mode)
        self.marker = os.urandom(8).hex()
        self.limits: dict[str, str] = {}
        self.warnings: list[str] = []
        self.protocol: str | None = None
        self.timed_out = False
        self.stopped = False  # stop(): the launcher ended it early on purpose
        self._fds: list[int] = []  # memfds bwrap reads at setup (seccomp program, /etc files)
        stopping.refuse_if_stopping()  # Ctrl-C: no worker starts once the stop is asked for
        try:
            full, env, cwd = self._command(list(argv), Path(workdir))
            self.cgroup = self._bound()
            self.t0 = time.monotonic()
            self.proc = subprocess.Popen(
                full,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=[*self._fds, *keep_fds],
                preexec_fn=_preexec(self._rlimits, self.cgroup),
            )
        except BaseException:
            self._cleanup_launch()
            if getattr(self, "cgroup", None) is not None:
                self.cgroup.destroy()
            raise
        self._cleanup_launch()
        stopping.started(self.proc.pid)
        self.cgroup.close_fds()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._err = bytearray()
        self._err_total = 0
        threading.Thread(target=self._pump, daemon=True).start()
        self._err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self._err_thread.start()
        self.started = self.t0  # `t0` moves to the job's arrival when it is fed later
        self.fed = False
        if stdin is not None:
            self.feed(stdin)

    def feed(self, data: bytes, timeout_s: float | None = None) -> None:
        """Write the job (once). For a worker started before its job: its wall-clock limit
        counts from now, `timeout_s` (default: the config's) long."""
        if self.fed:
            raise RuntimeError("the sandboxed worker's job was already written")
        self.fed = True
        self.t0 = time.monotonic()
        if timeout_s is not None:
            self.cfg = replace(self.cfg, timeout_s=timeout_s)
        # The job goes in from a thread: a worker that never reads cannot block the launcher.
        threading.Thread(target=self._feed, args=(data,), daemon=True).start()

    # -- launch -------------------------------------------------------------------------

    def _command(self, argv: list[str], workdir: Path) -> tuple[list[str], dict[str, str], str]:
        cfg = self.cfg
        if self.mode == "none":
            home, tmp = workdir / "home", workdir / "tmp"
            home.mkdir(parents=True, exist_ok=True)
            tmp.mkdir(parents=True, exist_ok=True)
            env = scrubbed_env(home, tmp, self.marker, cfg.extra_env)
            if (gpu_index := cfg.resolved_gpu_index()) is not None:
                env.update(
                    CUDA_VISIBLE_DEVICES=mounts.gpu_device(gpu_index)[1],
                    CUDA_DEVICE_ORDER="PCI_BUS_ID",
                )
            self.limits["isolation"] = "none: a plain process with the launcher's privileges"
            self.warnings.append("NO SANDBOX: the worker ran as a plain process (--sandbox none).")
            return argv, env, str(tmp)
        full, env, self._fds = bwrap_command(argv, cfg, self.marker)
        self.limits["isolation"] = (
            f"bwrap: uid {SANDBOX_UID}, no capabilities, seccomp profile {cfg.seccomp_profile!r}"
        )
        self.limits["scratch"] = f"tmpfs {cfg.scratch_bytes} bytes each for /tmp, /dev/shm, $HOME"
        return full, env, "/"

    def _bound(self) -> lim.Cgroup:
        cfg = self.cfg
        memory = lim.default_memory_cap() if cfg.max_memory_bytes is None else cfg.max_memory_bytes
        cg = lim.Cgroup.create(self.marker, cfg.max_processes, memory)
        nproc = None
        if "pids" in cg.notes:
            self.limits["processes"] = cg.notes["pids"]
        elif os.geteuid() != 0:
            current = lim.user_task_count(os.getuid())
            nproc = current + cfg.max_processes
            self.limits["processes"] = (
                f"RLIMIT_NPROC={nproc} (the user's {current} tasks + {cfg.max_processes})"
            )
        else:
            self.limits["processes"] = (
                "none: no writable pids cgroup, and RLIMIT_NPROC does not bind root"
            )
            self.warnings.append(
                "no process-count limit: no writable pids cgroup here, and RLIMIT_NPROC "
                "is not enforced for a root launcher"
            )
        if memory:
            self.limits["memory"] = cg.notes.get("memory", "none: no writable memory cgroup")
        else:
            self.limits["memory"] = "none: not asked for"
        self.limits["file_size"] = f"RLIMIT_FSIZE={cfg.max_file_bytes}"
        self.limits["open_files"] = f"RLIMIT_NOFILE={cfg.max_open_files}"
        self._rlimits = lim.rlimits(cfg.max_file_bytes, cfg.max_open_files, nproc)
        return cg

    def _cleanup_launch(self) -> None:
        # The child holds its own copies: bwrap reads them while it sets up.
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    # -- streams ------------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        limit, total = self.cfg.max_line_bytes, 0
        try:
            while True:
                line = self.proc.stdout.readline(limit)
                if not line:
                    break
                total += len(line)
                if len(line) >= limit and not line.endswith(b"\n"):
                    self.protocol = f"the worker wrote a channel line longer than {limit} bytes"
                    break
                if total > self.cfg.max_stdout_bytes:
                    self.protocol = (
                        f"the worker wrote more than {self.cfg.max_stdout_bytes} bytes "
                        "to its channel"
                    )
                    break
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        self._lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        keep = self.cfg.stderr_keep_bytes
        fd = self.proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            self._err_total += len(chunk)
            self._err += chunk
            if len(self._err) > keep:
                del self._err[: len(self._err) - keep]

    def lines(self) -> Iterator[bytes]:
        """Yield channel lines until the worker exits, breaks the channel's bounds, or the
        wall-clock limit passes."""
        deadline = self.t0 + self.cfg.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                return
            if stopping.STOPPING.is_set():
                self.stopped = True
                return
            try:
                line = self._lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self._lines.empty():
                    # Exited; an escaped child may still hold stdout open, so stop here.
                    time.sleep(0.05)
                    if self._lines.empty():
                        return
                continue
            if line is None:
                return
            yield line

    # -- end ----------------------------------------------------------------------------

    def stop(self) -> None:
        """End the worker now instead of waiting for it (the launcher has what it needs,
        e.g. a verdict already decided): `finish()` then kills it without waiting."""
        self.stopped = True

    def end_now(self) -> None:
        """stop(), and end the sandbox's top process now, so `lines()` ends too (a worker
        building past its compile budget: evaluate's watchdog). `finish()` still reaps
        whatever it left."""
        self.stopped = True
        try:
            self.proc.kill()
        except OSError:
            pass

    def finish(self) -> SandboxResult:
        if not self.fed:  # started for a job that never came
            self.stopped = True
            try:
                self.proc.stdin.close()
            except (OSError, AttributeError):
                pass
        waiting = not (self.timed_out or self.stopped or self.protocol is not None)
        waiting = waiting and not stopping.STOPPING.is_set()
        if self.proc.poll() is None and waiting:
            try:
                self.proc.wait(timeout=max(0.1, self.t0 + self.cfg.timeout_s - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.timed_out = True
        # Whatever the worker left behind (its group, a daemon in a new session) dies.
        _killpg(self.proc.pid)
        stray = kill_marked(self.marker)
        self.proc.wait()
        stopping.ended(self.proc.pid)
        self.cgroup.destroy()
        self._err_thread.join(timeout=2.0)
        rest = b""
        while not self._lines.empty():
            item = self._lines.get_nowait()
            rest += item or b""
        err = bytes(self._err)
        dropped = max(0, self._err_total - len(err))
        if dropped:
            err = f"[{dropped} earlier bytes of stderr dropped]\n".encode() + err
        return SandboxResult(
            returncode=None if self.timed_out else self.proc.returncode,
            stdout=rest,
            stderr=err,
            timed_out=self.timed_out,
            wall_s=time.monotonic() - self.t0,
            mode=self.mode,
            stray_killed=stray,
            limits=dict(self.limits),
            warnings=list(self.warnings),
            protocol=self.protocol,
            stderr_dropped=dropped,
            stopped=self.stopped,
        )


def run_sandboxed(
    argv: list[str], workdir: Path, cfg: SandboxConfig, stdin: bytes = b""
) -> SandboxResult:
    """Run `argv` isolated to completion (or its timeout); stdout is returned whole (bounded
    by cfg.max_stdout_bytes)."""
    sp = SandboxProcess(argv, workdir, cfg, stdin)
    out = b"".join(sp.lines())
    res = sp.finish()
    res.stdout = out + res.stdout
    return res


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
