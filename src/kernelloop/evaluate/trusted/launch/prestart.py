"""Correctness workers started before their candidate exists (issue 13).

Starting a sandboxed correctness worker — bubblewrap, Python, torch, the harness — took
~4 s of every evaluation on the H200 (2026-12-02, `benchmarks/eval_speed.py`: the `start`
stage), before the candidate's first call. None of it depends on the candidate: the
worker reads its job (which names the candidate) from stdin only after its imports. So
the loop starts the next evaluation's workers while the current one runs (`warm`), and
the next evaluation on the same thread takes them (`take`) and writes its job to them.

What a warm worker has and has not done: it runs in a sandbox configured exactly as
`evaluate` would configure it (the same folders, environment and limits), with a fresh
lane folder and, where kernels compile, a fresh empty compile-cache folder (renamed to
the candidate's folder once its bytes are known: compile_cache.adopt); it has imported
only the harness and run no implementation's code. Its wall-clock limit counts from the
job (`SandboxProcess.feed`). It is used only by an evaluation whose settings match its
own (task, device, sandbox mode, GPU, worker count, time limit) on the thread that
started it (a sandboxed process dies with the thread that spawned it: PR_SET_PDEATHSIG),
within `head_s` of its start; otherwise it is stopped and a fresh one starts as before.
Workers no evaluation took are stopped when the thread starts others, and at exit.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import kernelloop
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.outputs import output_file_limit
from kernelloop.evaluate.trusted.launch import compile_cache
from kernelloop.sandbox import SandboxConfig, SandboxProcess, detect_mode
from kernelloop.task import Task

WORKER_ARGV = [sys.executable, "-m", "kernelloop.evaluate.worker"]
# The folder the kernelloop package is imported from (src/ in a checkout), bound read-only
# into every worker's sandbox: the worker runs `python -m kernelloop.evaluate.worker`.
SOURCE_ROOT = Path(kernelloop.__file__).resolve().parents[1]


def scratch_root() -> Path:
    """Where evaluations keep their folders: RAM-backed when possible (GPU-sized outputs
    pass through here)."""
    shm = Path("/dev/shm")
    return (
        shm
        if shm.is_dir() and shutil.disk_usage(shm).free > (8 << 30)
        else Path(tempfile.gettempdir())
    )


def worker_env(task: Task, device: str) -> dict[str, str]:
    """The correctness worker's environment beyond the sandbox's own (the task as judged)."""
    interp = device == "cpu" and task.spec.task.language == "triton"
    env = {"TRITON_INTERPRET": "1"} if interp else {}
    # No MALLOC_PERTURB_: a constant fill of every fresh allocation was a tell a kernel could
    # read (issue 45). The worker poisons the output's memory itself, a fill drawn per call
    # (worker/calls.poison), on the CPU as on a GPU.
    if interp:
        # The interpreter runs the kernels in numpy on one thread; torch in the worker
        # only makes inputs and copies, where intra-op threads wait on the other
        # worker's core. (Not for `torch` tasks: their code's own threading, races
        # included, is what their determinism check must see.)
        env["OMP_NUM_THREADS"] = "1"
    return env


def lane_config(
    task: Task, device: str, mode: str, gpu: int | None, timeout_s: float, lane_dir: Path
) -> SandboxConfig:
    """The sandbox of one correctness worker whose folder is `lane_dir`."""
    return SandboxConfig(
        mode=mode,
        timeout_s=timeout_s,
        gpu=device == "cuda",
        gpu_index=gpu,
        rw_paths=[lane_dir],
        # The task folder (and the package itself) may live under /tmp, which the
        # sandbox replaces with an empty tmpfs: bind them back read-only.
        ro_paths=[task.folder, SOURCE_ROOT],
        hidden_paths=[task.workspace()],
        extra_env=worker_env(task, device),
        max_file_bytes=output_file_limit(device),
    )


def make_lane_dir(work: Path, k: int) -> Path:
    lane_dir = work / f"w{k}"
    (lane_dir / "impls").mkdir(parents=True)
    (lane_dir / "out").mkdir()
    return lane_dir


def key(
    task: Task, device: str, mode: str, gpu: int | None, workers: int, timeout_s: float
) -> tuple:
    """What a warm worker must match to be used: everything its sandbox was built from."""
    return (
        str(task.folder),
        task.digest(),
        task.spec.task.language,
        device,
        mode,
        gpu,
        workers,
        float(timeout_s),
    )


@dataclass
class Lane:
    proc: SandboxProcess
    lane_dir: Path
    cfg: SandboxConfig
    cache: Path | None  # the fresh compile-cache folder bound read-write, if any
    inbox: Inbox | None = None  # its shared output slots (the evaluation's once it is fed)


@dataclass
class Warm:
    key: tuple
    lanes: list[Lane]
    work: Path
    head_s: float
    at: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        """Stop every worker no evaluation took and remove their folders."""
        stop_lanes(self.lanes)
        self.lanes = []
        shutil.rmtree(self.work, ignore_errors=True)


def stop_lanes(lanes: list[Lane]) -> None:
    """Stop warm workers that will get no job, and remove their compile-cache folders."""
    for lane in lanes:
        try:
            lane.proc.stop()
            lane.proc.finish()
        except OSError:
            pass
        if lane.cache is not None:
            shutil.rmtree(lane.cache, ignore_errors=True)
        if lane.inbox is not None:
            lane.inbox.close()
        shutil.rmtree(lane.lane_dir, ignore_errors=True)


_lock = threading.Lock()
_warm: dict[int, Warm] = {}  # per thread (its workers die with it)


def warm(
    task: Task,
    device: str,
    *,
    sandbox: str,
    gpu: int | None,
    workers: int,
    timeout_s: float,
    head_s: float,
) -> bool:
    """Start `workers` correctness workers for this thread's next evaluation (stopping any
    it started before). Never raises: False where they could not start (the next
    evaluation then starts its own)."""
    discard()
    mode = detect_mode(sandbox)
    work = Path(tempfile.mkdtemp(dir=scratch_root()))  # no "kernelloop" in a worker's paths
    w = Warm(key(task, device, mode, gpu, workers, timeout_s), [], work, head_s)
    native = task.spec.task.language == "cuda"
    try:
        for k in range(workers):
            lane_dir = make_lane_dir(work, k)
            cfg = lane_config(task, device, mode, gpu, timeout_s + head_s, lane_dir)
            cfg, cache = compile_cache.bind_pending(cfg, native)
            inbox = Inbox.create(device)
            try:
                proc = SandboxProcess(
                    WORKER_ARGV,
                    lane_dir,
                    cfg,
                    stdin=None,
                    keep_fds=tuple(inbox.child_fds()) if inbox else (),
                )
            except BaseException:
                if cache is not None:
                    shutil.rmtree(cache, ignore_errors=True)
                if inbox is not None:
                    inbox.close()
                raise
            if inbox is not None:
                inbox.started()
            w.lanes.append(Lane(proc, lane_dir, cfg, cache, inbox))
    except Exception:  # noqa: BLE001 - an optimisation: the evaluation starts its own
        w.close()
        return False
    with _lock:
        _warm[threading.get_ident()] = w
    return True


def take(want: tuple, n: int) -> Warm | None:
    """This thread's warm workers for an evaluation of settings `want` needing `n` of them,
    or None (they are then stopped): wrong settings, too few, too old, or one has died."""
    with _lock:
        w = _warm.pop(threading.get_ident(), None)
    if w is None:
        return None
    fresh = time.monotonic() - w.at < w.head_s
    alive = all(lane.proc.proc.poll() is None for lane in w.lanes)
    if w.key != want or len(w.lanes) < n or not fresh or not alive:
        w.close()
        return None
    return w


def peek() -> Warm | None:
    """This thread's warm workers, left in place (what a test looks at)."""
    with _lock:
        return _warm.get(threading.get_ident())


def discard() -> None:
    """Stop this thread's warm workers, if any."""
    with _lock:
        w = _warm.pop(threading.get_ident(), None)
    if w is not None:
        w.close()


def stop_all() -> None:
    """Stop every thread's warm workers (the end of a run; also at exit)."""
    with _lock:
        left = list(_warm.values())
        _warm.clear()
    for w in left:
        w.close()


atexit.register(stop_all)
