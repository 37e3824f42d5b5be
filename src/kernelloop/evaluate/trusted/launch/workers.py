"""One sandboxed timing worker per implementation, driven over a command pipe.

Each worker gets its own folder (private home, tmp, output dir and a FIFO for commands)
and its own sandbox: under bubblewrap a worker sees no other worker's folder. The trusted
side writes one JSON command at a time and waits for the keyed answer with the same
sequence number, stamping both ends with its own clock; between turns the worker's whole
process tree is stopped (freeze.py). A worker that does not answer in time is killed.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from kernelloop.evaluate.trusted.channel import wire
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.text import import_reason, last_line
from kernelloop.evaluate.trusted.launch import compile_cache, naming
from kernelloop.evaluate.trusted.launch.freeze import Freezer
from kernelloop.sandbox import SandboxConfig, SandboxProcess, SandboxResult

# A developer's diagnosis (benchmarks/worker_profile.py): when set, every timing worker runs
# under cProfile and its profile is copied here as <slot>-<pid>.prof when it finishes.
PROFILE_DIR: Path | None = None


class WorkerFailed(Exception):
    """The worker cannot go on; `category` and the message say why (one sentence)."""

    def __init__(self, slot: str, category: str, message: str) -> None:
        super().__init__(message)
        self.slot, self.category = slot, category


@dataclass
class Answer:
    kind: str
    body: wire._Reply
    sent: float  # trusted clock, just before the command was written
    received: float  # trusted clock, when the answer line arrived
    waited_s: float = 0.0  # the worker's threads runnable but without a CPU during the turn
    marked: float | None = None  # trusted clock at a run-through batch's `made` line

    @property
    def wall_s(self) -> float:
        return self.received - self.sent


def file_name(slot: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in slot)


class TimingWorker:
    def __init__(
        self,
        slot: str,
        impl: Path,
        job: dict,
        folder: Path,
        cfg: SandboxConfig,
        key: str,
        inbox: Inbox | None = None,
    ) -> None:
        """`inbox`: a shared output slot for the audited outputs this worker is asked to
        show (trusted/channel/inbox.py; None: they come as files). The worker owns it from here:
        it is closed when the worker is finished."""
        self.slot, self.key = slot, key
        self.inbox = inbox
        self.dir = folder  # this worker's own: no other worker's sandbox binds it
        (self.dir / "out").mkdir(parents=True)
        self.out_dir = self.dir / "out"
        impl_copy = self.dir / f"{naming.module_name(impl)}.py"  # a user's import's name
        shutil.copyfile(impl, impl_copy)  # the worker runs a private copy of exactly these bytes
        fifo = self.dir / "commands"
        os.mkfifo(fifo, 0o600)
        # Read-write: opening never blocks, and the worker's read end sees EOF only when we close.
        self._fd = os.open(fifo, os.O_RDWR)
        job = {
            **job,
            "mode": "timing",
            "name": slot,
            "impl": str(impl_copy),
            "commands": str(fifo),
            "out_dir": str(self.out_dir),
            "channel_key": key,
        }
        if PROFILE_DIR is not None:
            job["cprofile"] = True
        # Its own folder, and the compile cache of exactly the bytes it runs (compile_cache.py);
        # the compiled slot (the reference under torch.compile) a cache folder of its own.
        if job.get("compile"):
            cfg = compile_cache.bind_compiled(
                replace(cfg, rw_paths=[self.dir]), impl_copy.read_bytes()
            )
        else:
            cfg = compile_cache.bind(
                replace(cfg, rw_paths=[self.dir]),
                impl_copy.read_bytes(),
                native=job.get("language") == "cuda",
            )
        if inbox is not None:
            job["slots"] = inbox.job()
        try:
            self.sp = SandboxProcess(
                [sys.executable, "-m", "kernelloop.evaluate.worker"],
                self.dir,
                cfg,
                json.dumps(job).encode(),
                keep_fds=tuple(inbox.child_fds()) if inbox is not None else (),
            )
        except BaseException:
            if inbox is not None:
                inbox.close()
            raise
        if inbox is not None:
            inbox.started()
        self.freezer = Freezer(self.sp.proc.pid, self.sp.marker if self.sp.mode == "none" else None)
        self.seq = 0
        self.dead = False
        self.result: SandboxResult | None = None
        self._lines: queue.Queue[tuple[float, bytes | None]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.sp.lines():
            self._lines.put((time.monotonic(), line))
        self._lines.put((time.monotonic(), None))

    # ---- one command, one answer --------------------------------------------------
    def hello(self, timeout_s: float) -> dict:
        return self._await("hello", time.monotonic(), timeout_s).body.env

    def ask(self, cmd: str, timeout_s: float, **args) -> Answer:
        """Send one command and return its answer; raises WorkerFailed (after killing the
        worker) on a timeout, a dead worker, a protocol break or a reported error."""
        return self.collect(cmd, self.send(cmd, **args), timeout_s)

    def send(self, cmd: str, **args) -> float:
        """Write one command; returns the trusted clock just before it was written."""
        if self.dead:
            raise WorkerFailed(self.slot, "crash", f"{self.slot}'s worker is no longer running")
        self.seq += 1
        line = json.dumps({"seq": self.seq, "cmd": cmd, **args}) + "\n"
        sent = time.monotonic()
        try:
            os.write(self._fd, line.encode())
        except OSError as e:
            self.kill()
            raise WorkerFailed(
                self.slot, "crash", f"{self.slot}'s worker stopped reading commands ({e})"
            ) from None
        return sent

    def collect(
        self, cmd: str, sent: float, timeout_s: float, expected: str | None = None
    ) -> Answer:
        """The answer to `cmd` (or, with `expected`, an interim line of that kind first)."""
        ans = self._await(cmd, sent, timeout_s, expected)
        if ans.kind == "import_error":
            self.kill()
            raise WorkerFailed(
                self.slot,
                "compile",
                f"{self.slot} failed to import: {import_reason(ans.body.error)}",
            )
        if ans.kind == "error":
            self.kill()
            raise WorkerFailed(
                self.slot, "timing", f"timing failed: {self.slot}: {last_line(ans.body.error)}"
            )
        return ans

    def _await(
        self, cmd: str, sent: float, timeout_s: float, expected: str | None = None
    ) -> Answer:
        expected = expected or _ANSWERS.get(cmd, cmd)
        try:
            received, raw = self._lines.get(timeout=max(0.01, timeout_s))
        except queue.Empty:
            self.kill()
            raise WorkerFailed(
                self.slot,
                "timeout",
                f"{self.slot}'s worker did not answer {cmd!r} within "
                f"{timeout_s:.0f} s and was killed",
            ) from None
        if raw is None:
            self.dead = True
            self._lines.put((received, None))
            raise WorkerFailed(self.slot, "crash", f"{self.slot}'s worker died during {cmd!r}")
        try:
            kind, body = wire.parse(raw, self.key, self.seq if cmd != "hello" else 0, expected)
        except wire.WireError as e:
            self.kill()
            raise WorkerFailed(self.slot, "protocol", f"{self.slot}: {e}") from None
        return Answer(kind, body, sent, received)

    # ---- process control ----------------------------------------------------------
    def pause(self) -> None:
        if not self.dead and not self.freezer.stop():
            self.kill()
            raise WorkerFailed(
                self.slot, "timing", f"{self.slot}'s processes could not be stopped between turns"
            )

    def resume(self) -> None:
        self.freezer.cont()

    def kill(self) -> None:
        self.dead = True
        self.freezer.cont()
        self.freezer.kill()
        try:
            self.sp.proc.kill()
        except OSError:
            pass

    def finish(self) -> SandboxResult:
        """Close the command pipe, let the worker exit (killing what is left) and collect
        its result; idempotent."""
        if self.result is None:
            self.freezer.cont()
            try:
                os.close(self._fd)
            except OSError:
                pass
            self.result = self.sp.finish()
            if self.inbox is not None:
                self.inbox.close()
            prof = self.dir / "worker.prof"
            if PROFILE_DIR is not None and prof.is_file() and not prof.is_symlink():
                shutil.copyfile(
                    prof, PROFILE_DIR / f"{file_name(self.slot)}-{self.sp.proc.pid}.prof"
                )
        return self.result


_ANSWERS = {
    "calibrate": "calibrated",
    "load": "loaded",
    "prepare": "prepared",
    "rough": "rough",
    "probe": "probed",
    "method": "method",
    "batch": "batch",
    "through": "through",
    "idle": "idle",
    "end": "ended",
    "output": "output",
    "profile": "profiled",
    "stop": "stopped",
    "hello": "hello",
}
