"""One worker per GPU of this host (issue #17): a round's jobs run at once, each on a GPU
of its own, never two on the same GPU; on a CPU-only host, `--jobs N` at once.

The executor only schedules: it hands each job a `Slot` naming its GPU, and the job binds
its sandboxed workers to that GPU's device nodes and CUDA_VISIBLE_DEVICES (the sandbox
does the binding: `SandboxConfig.gpu_index`). A job times its candidate against the best
and the baseline on its own GPU, so no speed is compared across GPUs.
"""

from __future__ import annotations

import os
import queue
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from kernelloop.errors import KernelloopError
from kernelloop.executor.base import Executor, InTurn, Job, Slot
from kernelloop.sandbox import stopping

R = TypeVar("R")
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")


def visible_gpus(environ: dict[str, str] | None = None, driver: Path = DRIVER_GPUS) -> list[int]:
    """The GPU indices (nvidia-smi's, PCI order) this process may use: CUDA_VISIBLE_DEVICES
    when it lists plain indices, else every GPU the driver lists; [] without a driver."""
    env = os.environ if environ is None else environ
    present = len(list(driver.iterdir())) if driver.is_dir() else 0
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip() and re.fullmatch(r"\d+(,\d+)*", listed.strip()):
        return [int(i) for i in listed.split(",") if int(i) < present]
    return list(range(present))


def parse_gpus(text: str | None, visible: list[int]) -> list[int]:
    """`--gpus 0,1,…` (default: every visible GPU) -> the indices, each visible, no repeat."""
    if not text:
        if not visible:
            raise KernelloopError(
                "no GPU is visible here; run on a GPU machine or leave --gpus out."
            )
        return visible
    try:
        wanted = [int(part) for part in text.split(",")]
    except ValueError:
        raise KernelloopError(
            f"--gpus {text!r} is not a list of GPU indices; pass e.g. --gpus 0,1."
        ) from None
    if len(set(wanted)) != len(wanted):
        raise KernelloopError(f"--gpus {text!r} names a GPU twice; name each GPU once.")
    if missing := [g for g in wanted if g not in visible]:
        raise KernelloopError(
            f"GPU {missing[0]} is not visible here (visible: {visible or 'none'}); "
            "pass indices from nvidia-smi."
        )
    return wanted


class LocalSlots:
    """A thread per slot; each job waits for a free slot, runs on it, and gives it back."""

    def __init__(self, slots: list[Slot], name: str) -> None:
        self.slots = len(slots)
        self._free: queue.Queue[Slot] = queue.Queue()
        for slot in slots:
            self._free.put(slot)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix=name)

    def submit(self, job: Job[R]) -> Future[R]:
        return self._pool.submit(self._run, job)

    def _run(self, job: Job[R]) -> R:
        slot = self._free.get()
        try:
            return job(slot)
        finally:
            self._free.put(slot)

    def close(self) -> None:
        # After a Ctrl-C (sandbox.stopping) jobs not yet started are dropped, and the
        # running ones end as their workers are killed: none is waited for.
        self._pool.shutdown(wait=not stopping.STOPPING.is_set(), cancel_futures=True)


class LocalGPUs(LocalSlots):
    """One job per GPU at a time, every GPU in `gpus` (nvidia-smi's indices) used."""

    def __init__(self, gpus: list[int]) -> None:
        if not gpus:
            raise KernelloopError("the local executor needs at least one GPU; pass --gpus 0.")
        self.gpus = list(gpus)
        super().__init__([Slot(i, g) for i, g in enumerate(self.gpus)], "gpu")


class LocalJobs(LocalSlots):
    """`jobs` evaluations at once on this machine's CPU (the interpreter, or plain-PyTorch
    tasks); their timings take turns (`executor.turns`), never overlapping another job."""

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise KernelloopError(f"--jobs {jobs} runs nothing; pass --jobs 1 or more.")
        super().__init__([Slot(i, None) for i in range(jobs)], "job")


def local_executor(device: str, gpus: str | None = None, jobs: int | None = None) -> Executor:
    """The executor of `kernelloop run` on this host: on a GPU, one job per GPU of `--gpus`
    (default: every visible GPU); on the CPU, `--jobs` at once (default 1: in turn)."""
    if device == "cuda":
        if jobs not in (None, 1):
            raise KernelloopError(
                "--jobs is for CPU runs; on a GPU each GPU judges one candidate at a time, "
                "so choose the GPUs with --gpus instead."
            )
        return LocalGPUs(parse_gpus(gpus, visible_gpus()))
    if gpus:
        raise KernelloopError(
            "--gpus needs a GPU run (--device cuda); on the CPU use --jobs N instead."
        )
    return InTurn() if (jobs or 1) == 1 else LocalJobs(jobs or 1)
