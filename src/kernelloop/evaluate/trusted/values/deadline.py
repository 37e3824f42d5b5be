"""A deadline per correctness call: a candidate that hangs (`while True: pass` in its
forward) is stopped and rejected as `timeout` within seconds of the call it hangs in,
named with that call's stage, instead of running into the evaluation's wall-clock limit
(600 s) or the compile budget (300 s, which then blamed the build: issue 47 item 6).

A lane's clock runs only while the trusted side owes it nothing: from the worker's hello
(or the judge finishing the lane's last line) until its next line arrives. Time a worker
waits for the judge (a slow float64 reference, another lane's call being judged) never
counts. The call it is on is the next of its part of the plan (a worker runs them in
order). Its deadline:

    allowance (the first call of each shape and dtype in this worker: import and compile)
    + max(floor, SLACK x the time this worker's earlier calls took per element x this
      call's elements)

The earlier calls are the candidate's own, measured on this side: a kernel slow per
element is given that much more, a fast one is not held to a stranger's pace. On the CPU
(the Triton interpreter) the floor and allowance are scaled by the machine's load per core
(capped at LOAD_CAP): a loaded CI box interprets slower, and an honest kernel must never
time out for that."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kernelloop.evaluate.trusted.values.plan import Call

SLACK = 20.0
LOAD_CAP = 2.0
# (floor, allowance) in seconds: the interpreter runs a flagship call in ~0.1-0.5 s idle; a
# GPU's Triton compile of a new specialisation takes ~0.3-10 s, a C++ build minutes
# (the compile budget covers that).
CPU = (8.0, 6.0)
GPU = (10.0, 120.0)
# Seconds each burn call of the late seed check (launch/late.py) is given at least: one
# interpreted launch on the plan's smallest shape took ~10-25 ms on the 2-core CPU.
BURN_FLOOR = 0.1


def _numel(call: Call) -> int:
    return call.shape.numel + 2048  # shards.CALL_OVERHEAD: launch and harness overhead


def load_factor() -> float:
    """The machine's 1-minute load per core, at least 1, at most LOAD_CAP."""
    try:
        per_core = os.getloadavg()[0] / max(os.cpu_count() or 1, 1)
    except OSError:
        return 1.0
    return min(max(per_core, 1.0), LOAD_CAP)


@dataclass
class Overdue:
    lane: int
    call: Call
    waited_s: float
    deadline_s: float


class CallDeadlines:
    """One watch thread over every lane (`end(lane)` is called on the one overdue)."""

    def __init__(
        self,
        plans: list[list[Call]],
        end: Callable[[int], None],
        device: str,
        compile_allowance_s: float | None = None,
        enabled: bool = True,
    ) -> None:
        floor, allowance = CPU if device == "cpu" else GPU
        scale = load_factor() if device == "cpu" else 1.0
        self.floor, self.allowance = floor * scale, (compile_allowance_s or allowance) * scale
        self.scale = scale
        self.plans, self.end = plans, end
        n = len(plans)
        self.idle_since: list[float | None] = [None] * n  # None: not started, or busy
        self.pending = [0] * n
        self.done = [False] * n
        self.calls_seen = [0] * n
        self.kinds: list[set] = [set() for _ in range(n)]
        self.rate = [0.0] * n  # seconds per element, the slowest earlier call of the lane
        self.overdue: Overdue | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if enabled:
            threading.Thread(target=self._watch, daemon=True, name="call-deadlines").start()

    # ---- events (any thread) ------------------------------------------------
    def started(self, lane: int) -> None:
        """The worker said hello: its import and first call begin."""
        with self._lock:
            self.idle_since[lane] = time.monotonic()

    def arrived(self, lane: int) -> None:
        with self._lock:
            self.pending[lane] += 1

    def handled(self, lane: int, was_call: bool) -> None:
        """The judge finished one of the lane's lines (a call's when `was_call`)."""
        with self._lock:
            now = time.monotonic()
            self.pending[lane] = max(self.pending[lane] - 1, 0)
            if was_call:
                k = self.calls_seen[lane]
                plan = self.plans[lane]
                if k < len(plan) and self.idle_since[lane] is not None:
                    # the gap this call took, measured to its arrival (approximately: now)
                    gap = now - self.idle_since[lane]
                    self.rate[lane] = max(self.rate[lane], gap / _numel(plan[k]))
                    self.kinds[lane].add(self._kind(plan[k]))
                self.calls_seen[lane] = k + 1
            if self.idle_since[lane] is not None and self.pending[lane] == 0:
                self.idle_since[lane] = now

    def finished(self, lane: int) -> None:
        with self._lock:
            self.done[lane] = True

    def stop(self) -> Overdue | None:
        self._stop.set()
        return self.overdue

    # ---- the watch ----------------------------------------------------------
    @staticmethod
    def _kind(call: Call) -> tuple:
        return (tuple(sorted(call.shape.dims.items())), call.dtype)

    def deadline(self, lane: int, call: Call) -> float:
        d = max(self.floor, SLACK * self.rate[lane] * _numel(call))
        if call.late_burn:  # the late seed check's calls run first, inside this one's time
            per = SLACK * self.rate[lane] * (call.late_numel + 2048)
            d += call.late_burn * max(BURN_FLOOR * self.scale, per)
        return d + (self.allowance if self._kind(call) not in self.kinds[lane] else 0.0)

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                now = time.monotonic()
                for i, plan in enumerate(self.plans):
                    since, k = self.idle_since[i], self.calls_seen[i]
                    if self.done[i] or since is None or self.pending[i] or k >= len(plan):
                        continue
                    limit = self.deadline(i, plan[k])
                    if now - since > limit:
                        self.overdue = Overdue(i, plan[k], now - since, limit)
                        self.done = [True] * len(self.plans)
                        break
                else:
                    continue
            for i in range(len(self.plans)):
                self.end(i)
            return


def reason(o: Overdue) -> str:
    c = o.call
    return (
        f"{c.suite}/{c.case} {c.shape.label} {c.dtype} (stage {c.stage}): the call did not "
        f"return within its deadline of {o.deadline_s:.0f} s (waited {o.waited_s:.0f} s) and "
        "the worker was stopped: a hang or an endless loop in the candidate; make every "
        'call finish (evaluate.md, "Deadlines")'
    )
