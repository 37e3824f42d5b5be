"""bench's memory plan (issue 34): before any worker allocates, estimate what every slot
and the trusted side will hold on the device on each shape, and size the batches so it
all fits in the memory that is free — or leave out the slots the gate can do without, or
refuse in one sentence as infrastructure, never as the candidate's failure.

What each side holds on one shape, from `io`: the inputs and the output at their real
dtypes — the task's [roofline] bytes (task.min_bytes), or for an imported KernelBench
problem its tensors at the shape on the meta device (its [roofline] bytes are a constant
of the problem's own size, 12 GiB for level1/19 even at a CPU shape of 64x48) — an
estimate, never a measurement:
- a worker: its process's own (CUDA context, allocator rounding, torch: WORKER_OVERHEAD),
  the benchmark's inputs and first output, and a batch of `m` timed calls in flight — each
  run-through batch (worker/gpu_timer.py `through`) makes all `m` input sets before the
  first unit and keeps every output to the end: (m + 1) × io;
- the trusted side: the audit's float64 inputs and reference, the output it reads back
  and the comparison's temporaries — 2 × io × 8 / elem_size — and on a CPU the `m` input
  sets it makes and hands over per batch.
Every worker holds its memory while it is stopped (its allocator keeps what it reserved),
so the slots are side by side: total = slots × worker(m) + trusted(m).

On the H200 (2026-12-03, issue 34 item 2) KernelBench level1/93 (32768² float32 and a
bool mask: io ≈ 9 GiB) ran out of memory ("Tried to allocate 8.00 GiB") with four slots
(candidate, baseline, A/A copy, compiled). Here the estimate for a batch of m calls is
4 × (1 + (m + 1) × 9) + 36 GiB: past 90% of the card's 140 GiB from m = 2 (148 GiB), so
the plan caps its batches at one call (112 GiB). The batch it was actually timed with
was not recorded, so this is consistent with that OOM, not a measurement of it.

The free memory is the trusted process's own reading (torch.cuda.mem_get_info on the
evaluation's GPU; MemAvailable on a CPU), or KERNELLOOP_MEMORY_BUDGET from the user's
environment (bytes, or e.g. "2GiB"): never anything a worker says.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from kernelloop.errors import KernelloopError
from kernelloop.task import Shape, Task
from kernelloop.task.load import ELEM_SIZES

GiB = 1 << 30
BUDGET_ENV = "KERNELLOOP_MEMORY_BUDGET"
WORKER_OVERHEAD = {"cuda": 1 * GiB, "cpu": GiB // 2}
HEADROOM = 0.9  # plan within this share of the free memory: fragmentation, other processes
MAX_BATCH = 1000  # interleave_rounds never times more calls in one batch (nor > reps / 5)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20}
_UNITS |= {"g": GiB, "gib": GiB, "gb": GiB, "mb": 1 << 20, "kb": 1 << 10, "t": 1 << 40}


class ShapeMemory(BaseModel):
    shape: str
    io_bytes: int = Field(
        description="inputs + output at their dtypes (task.toml [roofline] bytes)"
    )
    worker_bytes: int = Field(description="one worker at the chosen batch")
    trusted_bytes: int = Field(description="the trusted side's audit (float64) at that batch")
    total_bytes: int = Field(description="every slot side by side, and the trusted side")
    batch_cap: int = Field(
        description="the most timed calls per batch that fit (at most the most the rounds "
        "would time by themselves, reps / 5); the sizes above are at this batch"
    )


class MemoryPlan(BaseModel):
    """The record's `memory`: what was estimated, what was free, what was chosen."""

    free_bytes: int
    free_from: str = Field(description="where the free memory was read")
    slots: list[str] = Field(description="the slots timed side by side")
    left_out: list[str] = Field(
        default_factory=list, description="slots left out so the others fit (evidence, A/A copy)"
    )
    shapes: list[ShapeMemory] = Field(default_factory=list)
    refused: str = Field(default="", description="why nothing could be timed; empty if planned")

    def caps(self) -> dict[str, int]:
        return {s.shape: s.batch_cap for s in self.shapes}

    def line(self) -> str:
        """The plan in one line (bench prints it, the record keeps it)."""
        if self.refused:
            return f"memory plan: refused — {self.refused}"
        worst = max(self.shapes, key=lambda s: s.total_bytes, default=None)
        caps = ", ".join(f"{s.shape} ≤{s.batch_cap}" for s in self.shapes)
        said = (
            f"memory plan: {len(self.slots)} slot(s) side by side, "
            f"largest {_gib(worst.total_bytes) if worst else '0'} of {_gib(self.free_bytes)} "
            f"free ({self.free_from}); calls per batch {caps}"
        )
        if self.left_out:
            said += f"; left out to fit: {', '.join(self.left_out)}"
        return said


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def parse_bytes(text: str) -> int:
    """'2GiB', '512 MiB', '1500000000' -> bytes; KernelloopError otherwise."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise KernelloopError(
            f"{BUDGET_ENV}={text!r} is not a size; write bytes or e.g. 8GiB, 512MiB."
        )
    return int(float(m.group(1)) * _UNITS[unit])


def free_memory(device: str) -> tuple[int, str]:
    """(free bytes, where that was read) — the user's budget when set, else the device's."""
    if given := os.environ.get(BUDGET_ENV, "").strip():
        return parse_bytes(given), BUDGET_ENV
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()  # the current device: the evaluation's GPU
        return int(free), "torch.cuda.mem_get_info"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024, "MemAvailable"
    return 1 << 62, "unknown (no /proc/meminfo)"  # nothing to plan by: no limit


def plan_memory(
    task: Task,
    shapes: list[Shape],
    dtype: str,
    device: str,
    slots: list[str],
    optional: list[str],
    free: tuple[int, str],
    max_batch: int = MAX_BATCH,
) -> MemoryPlan:
    """The plan for `slots` (all of them side by side) on `shapes`; `optional` — slots the
    gate can do without, the first left out first — are left out only when even a batch of
    one call does not fit with them. Refused (the plan's `refused`) when it does not fit
    without them either."""
    free_b, where = free
    elem = ELEM_SIZES.get(dtype, 4)
    budget = HEADROOM * free_b
    kept, left_out = list(slots), []
    while True:
        plan = MemoryPlan(free_bytes=free_b, free_from=where, slots=kept, left_out=left_out)
        short = None
        for shape in shapes:
            io = io_bytes(task, shape, dtype)
            got = _fit(shape, io, elem, device, len(kept), budget, max_batch)
            plan.shapes.append(got)
            if got.batch_cap == 0:
                short = short or got
        if short is None:
            return plan
        dropping = [s for s in optional if s in kept]
        if not dropping:
            plan.refused = _refusal(short, len(kept), free_b, where)
            return plan
        kept.remove(dropping[0])
        left_out.append(dropping[0])


def beyond_int32(task: Task, shapes: list[Shape], dtypes: list[str], device: str):
    """A GPU evaluation's shape past 2³¹ elements (values/big_shape.py), planned against
    the free memory with the per-element costs measured on the H200 (launch/worker_count:
    24 B a worker, 48 B the judge, float32): its worker must stay within one worker's share
    (else an honest kernel's out-of-memory would read as its own: values/oom.py) and it,
    the judge and the other workers at the task's largest shape within the free memory.
    None on the CPU."""
    if device != "cuda":
        return None
    from kernelloop.evaluate.trusted.launch import worker_count as wc
    from kernelloop.evaluate.trusted.values.big_shape import Big, big_shape, plan_big

    n = wc.default_workers(device, task)
    share = wc.worker_share_bytes(device, n) or 0
    largest = max((s.numel for s in task.spec.shapes), default=1)
    others = (n - 1) * (wc.WORKER_BYTES_PER_ELEMENT * largest + wc.WORKER_FIXED_BYTES)

    def worker(shape: Shape) -> int:
        return wc.WORKER_BYTES_PER_ELEMENT * shape.numel + wc.WORKER_FIXED_BYTES

    got = big_shape(task, shapes, dtypes)
    if got is not None and worker(got[0]) > share:
        return Big(
            None,
            got[1],
            f"no shape beyond 2³¹ elements judged: {got[0].label}'s correctness worker needs "
            f"about {_gib(worker(got[0]))}, past one worker's share of this GPU "
            f"({_gib(share)} of {n} workers), so 32-bit offset overflow is not exercised here",
        )

    def need(shape: Shape, _dtype: str) -> int:
        judge = wc.JUDGE_BYTES_PER_ELEMENT * shape.numel + wc.JUDGE_FIXED_BYTES
        return worker(shape) + others + judge

    return plan_big(task, shapes, dtypes, free_memory(device), need)


def io_bytes(task: Task, shape: Shape, dtype: str) -> int:
    """The inputs and the output of one call at `shape`, at their dtypes."""
    if not task.spec.task.kernelbench:
        return int(task.min_bytes(shape, dtype))
    from kernelloop.task.kernelbench_roofline import roofline_terms

    terms = roofline_terms(task.folder / "problem.py", shape.dims)
    return terms.float_elems * ELEM_SIZES.get(dtype, 4) + terms.other_bytes


def _fit(
    shape: Shape, io: int, elem: int, device: str, n_slots: int, budget: float, max_batch: int
) -> ShapeMemory:
    """The largest batch (≤ max_batch) whose total fits `budget`; 0 when one call does not."""

    def sizes(m: int) -> tuple[int, int, int]:
        worker = WORKER_OVERHEAD[device] + (m + 1) * io
        trusted = 2 * io * 8 // elem + (m * io if device == "cpu" else 0)
        return worker, trusted, n_slots * worker + trusted

    lo, hi = 0, max_batch  # total(m) grows with m: the largest m that fits, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sizes(mid)[2] <= budget:
            lo = mid
        else:
            hi = mid - 1
    worker, trusted, total = sizes(max(lo, 1))
    return ShapeMemory(
        shape=shape.label,
        io_bytes=io,
        worker_bytes=worker,
        trusted_bytes=trusted,
        total_bytes=total,
        batch_cap=lo,
    )


def _refusal(s: ShapeMemory, n_slots: int, free_b: int, where: str) -> str:
    return (
        f"one call of shape {s.shape} needs about {_gib(s.total_bytes)} ({n_slots} worker(s) "
        f"× {_gib(s.worker_bytes)} and the trusted side's {_gib(s.trusted_bytes)}) and only "
        f"{_gib(free_b)} is free ({where}): infrastructure, not the candidate's failure — free "
        "memory, or benchmark smaller shapes (--shapes)"
    )
