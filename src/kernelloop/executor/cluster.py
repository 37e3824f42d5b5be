"""Ray actors as the executor (issue #17): a round's jobs on the GPUs of a Ray cluster.

One actor per GPU of the cluster (`num_gpus=1`: Ray gives each its own GPU and sets its
CUDA_VISIBLE_DEVICES), or `actors` CPU actors (`num_gpus=0`) on a cluster without GPUs.
A job goes to a free actor with its files as bytes (`job.shipped()`: the task folder's
entries, the candidate, the best); the actor runs the very same sandboxed evaluation on
its node, on its GPU, and sends the records back. Nothing is scheduled here beyond "a
free actor": Ray places the actors, as kernel_tuner does with one `num_gpus=1` actor per
GPU. The submitting process stays the only writer of the history.

An actor that dies while it runs a job (its process killed, crashed or OOM-killed, or its
node lost: Ray's `RayActorError`, or the job's result lost with the node) costs the job
nothing the first time: the actor is replaced by a fresh one and the job is sent to it
once more, told why (`again`). A second death loses the job (`JobLost`), which the loop
records as an infrastructure fault, not as a verdict. A fresh actor that cannot start
within `start_timeout_s` (no room left on the cluster: its node is gone) retires its slot;
the job goes to another actor, and the run goes on with fewer; with none left, the run
stops with one sentence saying so.

Ray is an optional extra: `pip install 'kernelloop[cluster]'`.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kernelloop.errors import KernelloopError
from kernelloop.executor.base import Job, JobLost, Slot

R = TypeVar("R")
MISSING = (
    "--executor ray needs Ray, which is not installed here; install it with "
    "pip install 'kernelloop[cluster]'."
)


NONE_LEFT = (
    "every Ray actor of this run died and no fresh one could start within {timeout:.0f} s; "
    "check the cluster's nodes (`ray status`), then continue with `kernelloop run TASK "
    "--resume` (or the same `kernelloop suite` command)."
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
    """`slots` actors; each job waits for a free one, runs there, and gives it back; an
    actor that dies under a job is replaced and the job sent to the fresh one once.

    `address`: "auto" (a running cluster found from this machine), "HOST:PORT", or None
    to start a local Ray instance for this process (`init` passes more to `ray.init`,
    e.g. num_cpus in tests). `start_timeout_s`: how long a fresh actor may take to start
    before its slot is given up."""

    def __init__(
        self,
        device: str,
        address: str | None = None,
        actors: int | None = None,
        init: dict | None = None,
        start_timeout_s: float = 300.0,
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
        self._remote = ray.remote(num_gpus=num_gpus, num_cpus=1)(JudgeActor)
        self._actors = [self._remote.remote() for _ in range(count)]
        self.where = ray.get([a.where.remote() for a in self._actors])
        self.slots = count
        self.start_timeout_s = start_timeout_s
        # What ends an actor under a job: the actor died or is unreachable (its process or
        # its node), or the result it sent was lost with its node.
        self._deaths = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)
        self.ran: list[tuple[str, int]] = []  # (job name, actor) in the order jobs started
        self.deaths: list[tuple[str, int, str]] = []  # (job name, actor, why), as they came
        self._lock = threading.Lock()
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(count):
            self._free.put(i)
        self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="ray")

    def submit(self, job: Job[R]) -> Future[R]:
        return self._pool.submit(self._run, job)

    def _run(self, job: Job[R]) -> R:
        """The job on a free actor; if that actor dies under it, once more on a fresh one
        (or, where none could start, on the next free actor); a second death: `JobLost`."""
        shipped: Any = job.shipped() if hasattr(job, "shipped") else job
        i = self._take()
        lost: list[str] = []
        while True:
            self.ran.append((job.name, i))
            try:
                result = self._ray.get(self._actors[i].run.remote(shipped, i))
            except self._deaths as e:
                lost.append(self._died(job, i, e))
            except BaseException:  # the job's own failure: the actor lives on
                self._free.put(i)
                raise
            else:
                self._free.put(i)
                return result
            fresh = self._replace(i)  # the slot gets a fresh actor, or is given up
            if len(lost) == 2:
                if fresh is not None:
                    self._free.put(fresh)
                raise JobLost(
                    f"its Ray actor died twice: {lost[0]}; then, on the second attempt, {lost[1]}"
                )
            _say(job, f"{job.name}: {lost[0]}; sending it to a fresh actor")
            shipped = shipped.again(lost[0]) if hasattr(shipped, "again") else shipped
            i = fresh if fresh is not None else self._take()

    def _take(self) -> int:
        """A free actor's slot (waits for one); none left at all: the run cannot go on."""
        i = self._free.get()
        if i < 0:  # the last slot was given up: wake the next waiter too
            self._free.put(i)
            raise KernelloopError(NONE_LEFT.format(timeout=self.start_timeout_s))
        return i

    def _died(self, job: Job, i: int, e: BaseException) -> str:
        host, pid, gpu = self.where[i]
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        why = (
            f"Ray actor {i} (host {host}, pid {pid}"
            + (f", GPU {gpu}" if gpu is not None else "")
            + f") died under it ({type(e).__name__}: {first[:160]})"
        )
        with self._lock:
            self.deaths.append((job.name, i, why))
        return why

    def _replace(self, i: int) -> int | None:
        """A fresh actor in slot `i` for the dead one, or None where it could not start in
        `start_timeout_s`: the slot is given up (the last one: `_take` says so)."""
        ray = self._ray
        _kill(ray, self._actors[i])
        fresh = self._remote.remote()
        try:
            where = ray.get(fresh.where.remote(), timeout=self.start_timeout_s)
        except (ray.exceptions.GetTimeoutError, *self._deaths):
            _kill(ray, fresh)
            with self._lock:
                self.slots -= 1
                if self.slots == 0:
                    self._free.put(-1)
            return None
        self._actors[i], self.where[i] = fresh, where
        return i

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for a in self._actors:
            _kill(self._ray, a)
        if self._owns:
            self._ray.shutdown()


def _kill(ray: Any, actor: Any) -> None:
    """End an actor (no restart); one that is already gone is left as it is."""
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # a dead or unknown actor: nothing left to end
        pass


def _say(job: Job, message: str) -> None:
    """Tell the job's progress line, where the job has one (the loop's jobs do)."""
    progress = getattr(job, "progress", None)
    if callable(progress):
        progress(message)
