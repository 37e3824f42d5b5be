"""Ray actors as the executor (issue #17): a round's jobs on the GPUs of a Ray cluster.

One actor per GPU of the cluster (`num_gpus=1`: Ray gives each its own GPU and sets its
CUDA_VISIBLE_DEVICES), or `actors` CPU actors (`num_gpus=0`) on a cluster without GPUs.
A job goes to a free actor with its files as bytes (`job.shipped()`: the task folder's
entries, the candidate, the best); the actor runs the very same sandboxed evaluation on
its node, on its GPU, and sends the records back. Nothing is scheduled here beyond "a
free actor": Ray places the actors, as kernel_tuner does with one `num_gpus=1` actor per
GPU. The submitting process stays the only writer of the history.

Ray is an optional extra: `pip install 'kernelloop[cluster]'`.
"""

from __future__ import annotations

import os
import queue
import socket
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kernelloop.errors import KernelloopError
from kernelloop.executor.base import Job, Slot

R = TypeVar("R")
MISSING = (
    "--executor ray needs Ray, which is not installed here; install it with "
    "pip install 'kernelloop[cluster]'."
)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise KernelloopError(MISSING) from None
    return ray


class JudgeActor:
    """What runs inside each actor: a job, on this actor's GPU (None: a CPU actor)."""

    def where(self) -> tuple[str, int, int | None]:
        """(host, process id, GPU) of this actor."""
        return socket.gethostname(), os.getpid(), self._gpu()

    def run(self, job: Job[R], index: int) -> R:
        return job(Slot(index, self._gpu()))

    @staticmethod
    def _gpu() -> int | None:
        import ray

        ids = ray.get_gpu_ids()
        return int(ids[0]) if ids else None


class RayActors:
    """`slots` actors; each job waits for a free one, runs there, and gives it back.

    `address`: "auto" (a running cluster found from this machine), "HOST:PORT", or None
    to start a local Ray instance for this process (`init` passes more to `ray.init`,
    e.g. num_cpus in tests)."""

    def __init__(
        self,
        device: str,
        address: str | None = None,
        actors: int | None = None,
        init: dict | None = None,
    ) -> None:
        ray = import_ray()
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, **(init or {}))
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise KernelloopError(
                    f"could not reach the Ray cluster at {address or 'a new local instance'} "
                    f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); start it "
                    "with `ray start --head` or pass --ray-address HOST:PORT."
                ) from None
            self._owns = True
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if device == "cuda":
            count, num_gpus = actors or gpus, 1
            if count < 1 or count > gpus:
                raise KernelloopError(
                    f"the Ray cluster has {gpus} GPU(s) for {count} GPU actor(s); add GPU "
                    "nodes or run with --device cpu."
                )
        else:
            count, num_gpus = actors or 1, 0
        remote = ray.remote(num_gpus=num_gpus, num_cpus=1)(JudgeActor)
        self._actors = [remote.remote() for _ in range(count)]
        self.where = ray.get([a.where.remote() for a in self._actors])
        self.slots = count
        self.ran: list[tuple[str, int]] = []  # (job name, actor) in the order jobs started
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(count):
            self._free.put(i)
        self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="ray")

    def submit(self, job: Job[R]) -> Future[R]:
        return self._pool.submit(self._run, job)

    def _run(self, job: Job[R]) -> R:
        shipped = job.shipped() if hasattr(job, "shipped") else job
        i = self._free.get()
        self.ran.append((job.name, i))
        try:
            return self._ray.get(self._actors[i].run.remote(shipped, i))
        finally:
            self._free.put(i)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for a in self._actors:
            self._ray.kill(a)
        if self._owns:
            self._ray.shutdown()
