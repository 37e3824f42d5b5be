"""One shape beyond 2³¹ elements on a GPU (issue 45): where 32-bit offsets overflow.

A kernel that computes its offsets in int32 (`row * stride` with `row = tl.program_id(0)`)
is right on every shape below 2³¹ elements and wrong past it; the declared maxima stop at
or below it (the flagship's 65536×32768 is exactly 2³¹: its last offset still fits). So a
GPU evaluation of a task whose shapes are open adds one `random` call on a shape just past
2³¹ elements: the last dimension at its declared maximum, the other dimensions at their
smallest but the first varying leading one, which carries the count past 2³¹ (odd), in
the task's smallest dtype, at rate 0 (one float64 reference, not a kept and a dropped
one). The flagship's is 65537×32768 in bfloat16.

It runs only where the memory allows (clock/memory_plan.beyond_int32, at the per-element
costs measured on the H200: 24 B a correctness worker, 48 B the judge): its worker within
one worker's share of the GPU (else an honest kernel's out-of-memory would read as its
own, values/oom.py), and it, the judge and the other workers within HEADROOM of the free
memory. Otherwise no call is added and the verdict says why (`Big.note`). By those costs
the flagship's needs ~50 GiB in its worker alone, past the share of four workers on an
H100 (~12 GiB) or an H200 (~21 GiB), and ~144 GiB with the judge: no card lent in 2026-12
holds it, and its verdict there says "no shape beyond 2³¹ elements judged: 65537x32768's
correctness worker needs about 50.00 GiB, past one worker's share of this GPU …". Never
on the CPU (an interpreted call of 65537 programs would take ~20 min).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelloop.evaluate.trusted.values.undeclared import TAG, _ranges, numel
from kernelloop.task import Shape, Task
from kernelloop.task.load import ELEM_SIZES

INT32 = 1 << 31
HEADROOM = 0.9  # as the memory plan's: fragmentation, other processes
GiB = 1 << 30


@dataclass(frozen=True)
class Big:
    shape: Shape | None  # None: not judged (note says why)
    dtype: str
    note: str  # for the verdict's judged_on


def big_shape(task: Task, selected: list[Shape], dtypes: list[str]) -> tuple[Shape, str] | None:
    """(the shape past 2³¹ elements, its dtype) for `task`, None where its shapes are
    closed, of different dimensions, or none varies."""
    if task.spec.task.closed_shapes or not selected or not dtypes:
        return None
    got = _ranges(task, selected)
    if got is None:
        return None
    names, lo, hi, varying, _, _ = got
    if not varying:
        return None
    dims = {n: lo[n] for n in names}
    last = names[-1]
    if last in varying:
        dims[last] = hi[last]
    grow = next((n for n in names[:-1] if n in varying), last)
    rest = numel(dims) // dims[grow]
    dims[grow] = (INT32 // rest + 1) | 1
    dtype = min(dtypes, key=lambda d: ELEM_SIZES.get(d, 4))
    return Shape(dims=dims, weight=1.0, tag=TAG), dtype


def plan_big(
    task: Task,
    selected: list[Shape],
    dtypes: list[str],
    free: tuple[int, str],
    need: Callable[[Shape, str], int],
) -> Big | None:
    """The evaluation's shape past 2³¹ elements where `need` fits the `free` memory
    ((bytes, where it was read)); a Big without a shape, saying why, where it does not
    fit or the task refuses it; None where the task has none (big_shape)."""
    got = big_shape(task, selected, dtypes)
    if got is None:
        return None
    shape, dtype = got
    label = shape.label
    if not task.accepts(shape.dims):
        return Big(None, dtype, f"no shape beyond 2³¹ elements judged: the task refuses {label}")
    needed, (free_b, where) = need(shape, dtype), free
    if needed > HEADROOM * free_b:
        return Big(
            None,
            dtype,
            f"no shape beyond 2³¹ elements judged: {label} in {dtype} needs about "
            f"{needed / GiB:.0f} GiB and {free_b / GiB:.0f} GiB is free ({where}), so 32-bit "
            "offset overflow is not exercised on this device",
        )
    return Big(
        shape,
        dtype,
        f"one shape beyond 2³¹ elements judged ({label}, {dtype}: 32-bit offsets overflow there)",
    )
