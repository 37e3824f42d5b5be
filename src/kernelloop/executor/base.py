"""The executor protocol: a job is a callable given the slot it runs on (which device);
an executor hands back a `concurrent.futures.Future` of what the job returns.

A job carries everything it needs (the task, the candidate's source on disk, the best to
time it against), so an executor may run it in another thread, process or machine. The
executor never looks inside a job: it only picks the slot. Whoever submits collects the
futures and is the single writer of the history; a job never writes it.

A candidate is always timed against the best and the baseline inside its own job, on its
own slot: no speed is ever compared across slots.

Two optional parts of a job, used by executors that run it elsewhere (Ray): `shipped()`,
the job with its files as bytes, and, on what `shipped()` returns, `again(reason)`, the
same job told that it is a second attempt and why (its first was lost through no fault of
its own). A job the executor lost for good is the future's `JobLost`.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, TypeVar

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True)
class Slot:
    """Where a job runs: `index` among the executor's slots, and the GPU it owns (None: the
    run's device as resolved, with no GPU of its own, as in `InTurn`)."""

    index: int = 0
    gpu: int | None = None

    @property
    def label(self) -> str:
        return f"gpu{self.gpu}" if self.gpu is not None else f"slot{self.index}"

    @property
    def device_key(self) -> str:
        """The device this slot shares with others of this process (`executor.turns`)."""
        return f"gpu{self.gpu}" if self.gpu is not None else "cpu"


class JobLost(Exception):
    """The executor lost the job through no fault of the job: the process running it died
    on every attempt (a Ray actor, or its node). Whoever submitted it records this as an
    infrastructure fault, never as a verdict on what the job carried."""


class Job(Protocol[R_co]):
    name: str

    def __call__(self, slot: Slot) -> R_co: ...


class Executor(Protocol):
    """`slots`: how many jobs run at once. `submit` never raises for a failing job: the
    failure is the future's exception."""

    slots: int

    def submit(self, job: Job[R]) -> Future[R]: ...

    def close(self) -> None: ...


class InTurn:
    """Runs each job when it is submitted, one after another, in the caller's thread: the
    round's candidates are judged in turn on the run's one device."""

    slots = 1

    def __init__(self) -> None:
        self.slot = Slot(0, None)
        self.ran: list[str] = []  # job names in the order they ran

    def submit(self, job: Job[R]) -> Future[R]:
        future: Future[R] = Future()
        future.set_running_or_notify_cancel()
        self.ran.append(job.name)
        try:
            future.set_result(job(self.slot))
        except Exception as e:  # handed to whoever waits on the future
            future.set_exception(e)
        return future

    def close(self) -> None:
        pass
