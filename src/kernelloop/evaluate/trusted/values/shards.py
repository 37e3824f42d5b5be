"""Several correctness workers for one evaluation: the plan split into shards, each run by
a sandboxed worker of its own, and all their channels read by one judge (issue 13).

Why: under the Triton interpreter a worker is one Python thread interpreting the
candidate's kernels, and that is almost all of an evaluation's time (the flagship
baseline on the CPU: ~40 s of its ~45 s in the worker); two workers on two cores halve it.

What stays the same: every planned call runs once, in exactly one worker, and the trusted
side judges it exactly as before (the same `Judge`, in this process's one thread, in the
order the lines arrive). A group's calls (a determinism pair, a stochastic rate's three
calls) stay in one worker and in their order, so a candidate's hidden state shows between
them as it did. Each worker has its own work folder (its copy of the candidate, its out
dir), its own channel key, channel state and line limit, and the first failed check in
any of them stops all of them.

What differs: each worker sees a subset of the calls, so state a candidate keeps across
calls (a cache keyed by shape, a call counter) meets a different sequence of calls than
in one worker; every call is still judged on its own bytes, so such state can only be
caught or missed differently, never make a wrong output pass.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.values import deadline
from kernelloop.evaluate.trusted.values.failure import Failure
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import STAGES, Call, Plan
from kernelloop.evaluate.trusted.values.stages import StageClock

# A call's cost in elements: its shape's plus a fixed part (launch and harness overhead;
# on the CPU a 2x8200 call takes ~0.43 s and a 7x129 one ~0.07 s, i.e. about 2k elements).
CALL_OVERHEAD = 2048


class Lines(Protocol):
    def lines(self): ...
    def stop(self) -> None: ...
    def end_now(self) -> None: ...


@dataclass
class Lane:
    """One worker of the evaluation: its process, its calls, its out dir, its key."""

    proc: Lines
    plan: Plan
    outputs: OutputDir
    key: str
    max_messages: int


def _numel(call: Call) -> int:
    n = 1
    for v in call.shape.dims.values():
        n *= v
    return n


def _kind(unit: list[Call]) -> tuple:
    """What a JIT compiler is likely to specialise a call's kernels on: its shape and dtype."""
    c = unit[0]
    return (tuple(sorted(c.shape.dims.items())), c.dtype)


def split(plan: Plan, n: int) -> list[Plan]:
    """`plan` in at most `n` shards of about equal cost in every stage: each shard keeps the
    plan's order (stages cheapest first), and a group's calls stay in one shard.

    Stage by stage, the calls of one shape and dtype (a kind) go to one shard together,
    costliest kind first, to the shard with the least work so far (or to one that already
    has that kind, where that costs the balance at most the kind itself): a new
    candidate's Triton kernels compile once per specialisation in every worker that meets
    it (~0.3 s each on the H200, 2026-12-02), so kinds kept apart compile in parallel
    instead of twice. A kind costing more than half a shard's share of the stage is
    split into its units (groups, or single calls), each placed the same way."""
    if n <= 1 or len(plan.calls) < 2:
        return [plan]
    index = {id(c): i for i, c in enumerate(plan.calls)}
    units: dict[str, list[Call]] = {}
    for c in plan.calls:
        units.setdefault(c.group or f"call:{c.id}", []).append(c)
    loads = [0] * n
    shards: list[list[Call]] = [[] for _ in range(n)]
    kinds: list[set[tuple]] = [set() for _ in range(n)]

    def cost(calls: list[Call]) -> int:
        return sum(_numel(c) + CALL_OVERHEAD for c in calls)

    def place(calls: list[Call], kind: tuple) -> None:
        k = min(range(n), key=lambda j: loads[j])
        c = cost(calls)
        near = [j for j in range(n) if kind in kinds[j] and loads[j] <= loads[k] + c]
        if near:
            k = min(near, key=lambda j: loads[j])
        shards[k].extend(calls)
        loads[k] += c
        kinds[k].add(kind)

    for stage in STAGES:
        mine = [u for u in units.values() if u[0].stage == stage]
        share = cost([c for u in mine for c in u]) / n
        by_kind: dict[tuple, list[list[Call]]] = {}
        for unit in mine:
            by_kind.setdefault(_kind(unit), []).append(unit)
        pieces: list[tuple[tuple, list[Call]]] = []
        for kind, group in by_kind.items():
            calls = [c for u in group for c in u]
            if cost(calls) > share / 2:
                pieces.extend((kind, u) for u in group)
            else:
                pieces.append((kind, calls))
        for kind, calls in sorted(pieces, key=lambda p: cost(p[1]), reverse=True):
            place(calls, kind)
    out = [Plan(calls=sorted(s, key=lambda c: index[id(c)])) for s in shards if s]
    assert sum(len(p.calls) for p in out) == len(plan.calls)
    return out


def consume(
    lanes: list[Lane],
    judge: Judge,
    say: Callable[[str], None],
    clock: StageClock,
    stop_at_failure: bool = False,
    plan: Plan | None = None,
    compile_budget_s: float | None = None,
    device: str | None = None,
    compile_allowance_s: float | None = None,
) -> list[dict]:
    """Read every lane's channel (channel.Reader: every line validated, nothing raises) and
    judge each call's output as it arrives, until every worker ends. One lane is read in
    this thread; several through a thread each that only moves raw lines into one queue,
    so judging stays in this thread. Returns each lane's channel state.

    With `stop_at_failure`, a failed check ends the evaluation as it would with one
    worker, which stops at the first failing call of the plan (`plan`: the whole plan,
    whose order decides; default the one lane's): a worker is stopped once every call of
    its own that comes before the earliest failure so far is judged (a failure there
    moves that point earlier), so every call one worker would have judged before its
    first failure is judged, and `judge.failures` ends in plan order: the verdict's first
    reason and category are the ones one worker gives, whichever worker got there first.

    `compile_budget_s`: once the compile stage (a C++ build, the first call of every dtype)
    has run that long, every worker is stopped and the candidate rejected as `compile`.

    `device`: each call has a deadline (deadline.py; `compile_allowance_s` for the first
    call of each shape and dtype, default the device's): a worker silent on one call past
    it is stopped and the candidate rejected as `timeout` at that call's stage."""
    watch = _CompileBudget(lanes, clock, compile_budget_s)
    calls = deadline.CallDeadlines(
        [lane.plan.calls for lane in lanes],
        lambda i: lanes[i].proc.end_now(),
        device or "cpu",
        compile_allowance_s,
        enabled=device is not None,
    )
    try:
        return _consume(lanes, judge, say, clock, stop_at_failure, plan, calls)
    finally:
        if (late := calls.stop()) is not None:
            judge.failures.append(Failure("timeout", deadline.reason(late)))
            clock.judged(late.call.stage, True, check=f"timeout in {late.call.suite}")
        elif watch.stop():
            judge.failures.append(
                Failure(
                    "compile",
                    f"the compile stage (building the candidate and the first call of every "
                    f"dtype) took more than the compile budget of {compile_budget_s:g} s; "
                    "make the build smaller or raise rules.compile_budget_s in task.toml",
                )
            )


class _CompileBudget:
    """A thread that stops every lane once the compile stage outlasts its budget."""

    def __init__(self, lanes: list[Lane], clock: StageClock, budget: float | None) -> None:
        self.over = False
        self._done = threading.Event()
        if budget is None:
            return

        def watch() -> None:
            while not self._done.wait(0.25):
                spent = clock.elapsed_in("compile")
                if spent is not None and spent > budget:
                    self.over = True
                    for lane in lanes:
                        lane.proc.end_now()
                    return

        threading.Thread(target=watch, daemon=True, name="compile-budget").start()

    def stop(self) -> bool:
        """End the watch; True when the budget ran out."""
        self._done.set()
        return self.over


def _consume(
    lanes: list[Lane],
    judge: Judge,
    say: Callable[[str], None],
    clock: StageClock,
    stop_at_failure: bool,
    plan: Plan | None,
    calls: deadline.CallDeadlines,
) -> list[dict]:
    whole = plan if plan is not None else lanes[0].plan
    order = {c.id: i for i, c in enumerate(whole.calls)}
    readers = [
        channel.Reader(
            lane.key, calls=[c.id for c in lane.plan.calls], max_messages=lane.max_messages
        )
        for lane in lanes
    ]
    track = _Track(order, len(whole.calls))
    handlers = [
        _handler(i, lane, reader.state, judge, say, clock, track, calls)
        for i, (lane, reader) in enumerate(zip(lanes, readers, strict=True))
    ]
    done = [False] * len(lanes)

    def settle() -> bool:
        """Stop every lane with nothing left before the earliest failure; True when all
        lanes are done."""
        if stop_at_failure and track.bound is not None:
            for i, lane in enumerate(lanes):
                if done[i]:
                    continue
                # A worker stops at its own failure (as one worker did); the others once
                # every call of theirs before the earliest failure is judged.
                if i in track.lanes or track.clear(lane.plan, readers[i].state["seen"]):
                    lane.proc.stop()
                    done[i] = True
                    calls.finished(i)
        return all(done)

    def feed(i: int, raw: bytes, counted: bool = False) -> None:
        """One raw line of lane `i` judged; the call deadlines told (`counted`: its arrival
        was told by the lane's pump)."""
        if not counted:
            calls.arrived(i)
        before = len(readers[i].state["seen"])
        try:
            readers[i].feed(raw, handlers[i], lanes[i].outputs.purge)
        finally:
            calls.handled(i, len(readers[i].state["seen"]) > before)

    # Once a channel is violated, its out dir is cleared after every line: the worker
    # must not wait for room (up to its deadline) when nothing it sends counts any more.
    try:
        if len(lanes) == 1:
            for raw in lanes[0].proc.lines():
                feed(0, raw)
                if settle():
                    break
            return [readers[0].state]
        lines: queue.Queue[tuple[int, bytes | None]] = queue.Queue()

        def pump(i: int) -> None:
            try:
                for raw in lanes[i].proc.lines():
                    calls.arrived(i)
                    lines.put((i, raw))
            finally:
                lines.put((i, None))

        for i in range(len(lanes)):
            threading.Thread(target=pump, args=(i,), daemon=True, name=f"lane-{i}").start()
        while not all(done):
            i, raw = lines.get()
            if done[i]:
                continue  # stopped: nothing it sends counts any more
            if raw is None:
                done[i] = True
                calls.finished(i)
                continue
            feed(i, raw, counted=True)
            settle()
        return [r.state for r in readers]
    finally:
        track.sort(judge)


class _Track:
    """Where in the plan each failure happened (`bound`: the earliest so far)."""

    def __init__(self, order: dict[str, int], total: int) -> None:
        self.order, self.total = order, total
        self.bound: int | None = None
        self.failure_index: list[int] = []  # one per judge failure, in the order found
        self.lanes: set[int] = set()  # lanes that failed a check
        self.judged = 0

    def failed(self, lane: int, call: Call, new: int) -> None:
        idx = self.order.get(call.id, self.total)
        self.failure_index.extend([idx] * new)
        if new:
            self.lanes.add(lane)
            if self.bound is None or idx < self.bound:
                self.bound = idx

    def clear(self, plan: Plan, seen: set[str]) -> bool:
        """Every call of `plan` before the earliest failure is judged."""
        assert self.bound is not None
        return all(c.id in seen for c in plan.calls if self.order.get(c.id, 0) < self.bound)

    def sort(self, judge: Judge) -> None:
        """`judge.failures` in plan order (stable: one call's failures keep theirs)."""
        n = len(self.failure_index)
        if n == len(judge.failures) and n > 1:
            ranked = sorted(range(n), key=lambda k: self.failure_index[k])
            judge.failures[:] = [judge.failures[k] for k in ranked]


def _handler(
    index: int,
    lane: Lane,
    state: dict,
    judge: Judge,
    say: Callable[[str], None],
    clock: StageClock,
    track: _Track,
    calls_deadline: deadline.CallDeadlines,
) -> Callable[[dict], None]:
    calls = lane.plan.by_id()

    def handle(msg: dict) -> None:
        kind = msg["type"]
        if kind == "hello":
            state["hello"] = msg["env"]
            clock.advance("compile")
            calls_deadline.started(index)
        elif kind == "call":
            call = calls[msg["id"]]  # parse() checked: planned for this lane, not seen before
            failed, t = len(judge.failures), time.monotonic()
            try:
                judge.judge(call, msg, lane.outputs)
            except OutputError as e:
                judge._fail(call, call.suite, "protocol", f"its output could not be read: {e}")
                channel.violation(state, f"{call.id}: {e}")
            finally:  # whatever the judge raised (the reader makes it a violation)
                new = len(judge.failures) - failed
                track.failed(index, call, new)
                check = f"{judge.failures[failed].category} in {call.suite}" if new else None
                clock.judged(call.stage, new > 0, time.monotonic() - t, check)
            track.judged += 1
            if track.judged % 10 == 0:
                say(f"{clock.current or call.stage}: checked {track.judged}/{track.total} calls")
        elif kind == "compile":
            state["kernels"] = msg["kernels"]
        elif kind == "import_error":
            state["import_error"], state["import_impl"] = msg["error"], msg["impl"]
            state["import_compiler"] = bool(msg.get("compiler"))
        elif kind == "fatal":
            state["fatal"] = msg["error"]

    return handle
