"""One worker per GPU of this host (issue #17): a round's jobs run at once, each on a GPU
of its own, never two on the same GPU.

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
from kernelloop.executor.base import Job, Slot

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


class LocalGPUs:
    """A thread per GPU; each job waits for a free GPU, runs with it, and gives it back."""

    def __init__(self, gpus: list[int]) -> None:
        if not gpus:
            raise KernelloopError("the local executor needs at least one GPU; pass --gpus 0.")
        self.gpus = list(gpus)
        self.slots = len(self.gpus)
        self._free: queue.Queue[Slot] = queue.Queue()
        for i, g in enumerate(self.gpus):
            self._free.put(Slot(i, g))
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="gpu")

    def submit(self, job: Job[R]) -> Future[R]:
        return self._pool.submit(self._run, job)

    def _run(self, job: Job[R]) -> R:
        slot = self._free.get()
        try:
            return job(slot)
        finally:
            self._free.put(slot)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
