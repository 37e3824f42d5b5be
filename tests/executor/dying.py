"""Test-only jobs whose Ray actor dies under them, for tests/executor/test_ray_deaths.py.

They run inside real Ray actors (the workers import this module: Ray puts the driver's
working directory, the repository root, on their path), so they import nothing from
pytest. Attempts are counted in a tally file (one line per attempt, the actor's pid):
the actors of a local Ray instance share this machine's disk, and a dead actor's memory
cannot count anything."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

DIED = 3  # the exit status of an actor a test job ends


def attempt(tally: str) -> int:
    """Count this attempt (this process's pid, one line) and return its number, from 1."""
    with open(tally, "a") as f:
        f.write(f"{os.getpid()}\n")
    return len(Path(tally).read_text().split())


def pids(tally: str) -> list[int]:
    """The actor process of every attempt so far, in order."""
    path = Path(tally)
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@dataclass(frozen=True)
class Dies:
    """Its first `deaths` attempts end their actor's process (os._exit, as a crash or the
    OOM killer would); a later attempt returns where it ran and why it was sent again.
    `sleep_s`: the first attempt waits that long before it ends or returns, so that a test
    can kill its actor from outside while it runs."""

    name: str
    tally: str
    deaths: int = 0
    sleep_s: float = 0.0
    retried_after: str = ""

    def again(self, reason: str) -> Dies:
        return replace(self, retried_after=reason)

    def __call__(self, slot: Any) -> dict:
        n = attempt(self.tally)
        if n == 1:
            time.sleep(self.sleep_s)
        if n <= self.deaths:
            os._exit(DIED)
        return {"attempt": n, "pid": os.getpid(), "slot": slot.index, "after": self.retried_after}


@dataclass(frozen=True)
class DiesMidEvaluation:
    """A shipped evaluation (loop.evaluation.ShippedJob) whose first `deaths` attempts end
    their actor's process once the evaluation has started a process of its own (the
    sandbox), i.e. in the middle of judging the candidate."""

    inner: Any
    tally: str
    deaths: int

    @property
    def name(self) -> str:
        return self.inner.name

    def again(self, reason: str) -> DiesMidEvaluation:
        return replace(self, inner=self.inner.again(reason))

    def __call__(self, slot: Any) -> Any:
        if attempt(self.tally) > self.deaths:
            return self.inner(slot)
        done = threading.Event()
        threading.Thread(target=_exit_once_a_child_runs, args=(done,), daemon=True).start()
        try:
            return self.inner(slot)
        finally:  # finished first (the test then fails): its actor lives
            done.set()


def _exit_once_a_child_runs(done: threading.Event, up_s: float = 1.0) -> None:
    """End this process `up_s` after a child of it appears (the sandbox, past bubblewrap's
    start-up: tests/loop/test_kill_resume.py's SETTLE_S says why), unless `done` by then."""
    me = os.getpid()
    while not done.is_set():
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
            if ppid == me:
                if not done.wait(up_s):
                    os._exit(DIED)
                return
        time.sleep(0.05)


class Doomed:
    """A real Ray executor whose jobs named in `deaths` lose their actor mid-evaluation
    that many times: the loop sees only the executor protocol, as with any executor."""

    def __init__(self, ray_actors: Any, deaths: dict[str, int], tallies: Path) -> None:
        self.ray_actors, self.deaths, self.tallies = ray_actors, deaths, tallies

    @property
    def slots(self) -> int:
        return self.ray_actors.slots

    def submit(self, job: Any) -> Future:
        if job.name in self.deaths:
            job = _Marked(job, str(self.tallies / job.name), self.deaths[job.name])
        return self.ray_actors.submit(job)

    def close(self) -> None:
        self.ray_actors.close()


@dataclass(frozen=True)
class _Marked:
    job: Any
    tally: str
    deaths: int

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def progress(self) -> Any:
        return self.job.progress

    def shipped(self) -> DiesMidEvaluation:
        return DiesMidEvaluation(self.job.shipped(), self.tally, self.deaths)
