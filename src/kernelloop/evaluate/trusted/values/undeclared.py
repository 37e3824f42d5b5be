"""Shapes no file names, drawn per evaluation from the plan's secret `Seeds` (plan.py).

A kernel must be correct for every shape its op accepts, not only for the declared ones.
Two draws, each judged once (random inputs, one dtype drawn too):

- the *tile* shape: every dimension that varies across the task's shapes and can pass
  one tile (TILE) gets an odd value just above it where the budget allows, the others an
  odd value near their smallest. An odd count ≥ 65 is no multiple of 8, 16, 32, 64 or
  128, so a kernel that skips the last partial tile, or handles only even widths, fails
  here. Before, every CPU shape of the flagship had fewer than 64 rows (the extreme suite
  was shrunk) and a kernel correct only for rows that are a multiple of 64 was accepted
  on the CPU (issue 33). Its values stay just past one tile: under the Triton
  interpreter a call costs ~10 ms per program (a 97x129 call of the flagship baseline
  took ~0.9 s on the 2-core CPU, 2026-12-03), so rows are few hundreds at most and the
  other dimensions small.
- the *wide* shape (`unseen_shape`): drawn log-uniformly over the task's own ranges up to
  the largest selected shape's element count, odd where it can be, no dimension at a
  listed value: code specialised to the listed sizes fails here.

A task that declares its shapes closed (`[task] closed_shapes`, docs/task.md) gets none.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Callable

from kernelloop.task import Shape, Task

TILE = 64  # the largest tile a count must not be a multiple of is 128: odd values clear both
TAG = "undeclared"  # the drawn shapes' tag (Shape.tag)
TILE_CAP = 1 << 20  # elements: the tile shape's floor never asks for more


def undeclared_shapes(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> list[Shape]:
    """The evaluation's undeclared shapes (the tile one, then the wide one), none for a
    task whose shapes are closed. `rng`: the plan's secret generator."""
    if task.spec.task.closed_shapes or not selected:
        return []
    rng = rng or _RNG
    out: list[Shape] = []
    for draw in (tile_shape, unseen_shape):
        shape = draw(task, selected, rng, accepts)
        if shape is not None and shape.label not in {s.label for s in out}:
            out.append(shape)
    return out


def undeclared_ranges(task: Task, selected: list[Shape]) -> dict[str, tuple[int, int]] | None:
    """The dimensions the undeclared shapes vary and the range of each (the task's
    smallest and largest declared value; the tile shape's go just past TILE within it);
    None where none is drawn (closed shapes, or shapes of different dimensions). The
    agent's brief quotes these (loop/context.py), so it follows any change made here."""
    if task.spec.task.closed_shapes or not selected:
        return None
    got = _ranges(task, selected)
    if got is None:
        return None
    _, lo, hi, varying, _, _ = got
    return {n: (lo[n], hi[n]) for n in varying}


def _ranges(task: Task, selected: list[Shape]):
    """(names, lo, hi, varying, budget, listed) over the task's declared shapes, or None
    when its shapes do not all have the same dimensions."""
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    names = list(selected[0].dims)
    if any(list(s.dims) != names for s in every):
        return None
    lo = {n: min(s.dims[n] for s in every) for n in names}
    hi = {n: max(s.dims[n] for s in every) for n in names}
    varying = [n for n in names if lo[n] < hi[n]]
    budget = max(numel(s.dims) for s in selected)
    listed = {n: {s.dims[n] for s in every} for n in names}
    return names, lo, hi, varying, budget, listed


def _odd_in(rng: random.Random, a: int, b: int) -> int:
    """An odd value drawn uniformly in [a, b]; `b` when the range holds no odd value."""
    odds = range(a | 1, b + 1, 2)
    return rng.choice(odds) if len(odds) else b


def tile_shape(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> Shape | None:
    """Every varying dimension odd; those whose range passes TILE drawn in
    [max(lo, TILE+1), 1.5 × that] in a secret order while the element count stays within
    the largest selected shape's (at least twice the smallest all-tall shape, up to
    TILE_CAP), the rest (and any that no longer fit) in [lo, 2 lo].
    A dimension every declared shape holds fixed (a head size) is the interface: kept.
    None where no varying dimension can pass TILE within the budget."""
    got = _ranges(task, selected)
    if got is None:
        return None
    names, lo, hi, varying, budget, listed = got
    rng = rng or _RNG
    tall = [n for n in varying if hi[n] > TILE]
    if not tall:
        return None
    # Room for every tall dimension past one tile even where the selected shapes are
    # smaller (a test's single 7x129 shape): twice the smallest such shape, within TILE_CAP.
    floor = numel({n: max(lo[n], TILE + 1) if n in tall else lo[n] for n in names})
    budget = max(budget, min(2 * floor, TILE_CAP))
    for _ in range(50):
        dims = {n: lo[n] for n in names}
        for n in rng.sample(tall, len(tall)):
            a = max(lo[n], TILE + 1)
            top = min(hi[n], a + a // 2, budget // max(numel(dims) // dims[n], 1))
            if top < a:
                continue  # past the budget with the tall ones drawn so far: kept low
            dims[n] = _odd_in(rng, a, top)
        if all(dims[n] <= TILE for n in tall):
            return None  # not even one fits: the budget is below one tile's rows
        for n in varying:
            if dims[n] > TILE:
                continue
            top = min(hi[n], 2 * lo[n] + 1, budget // max(numel(dims) // dims[n], 1))
            dims[n] = _odd_in(rng, lo[n], max(top, lo[n]))
        if any(dims[n] in listed[n] for n in varying):
            continue
        if accepts is not None and not accepts(dims):
            continue
        return Shape(dims=dims, weight=1.0, tag=TAG)
    return None


def unseen_shape(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> Shape | None:
    """A shape drawn per evaluation from the task's own ranges, odd where it can be.

    A candidate specialised to the listed shapes (hard-coded sizes, a block that only
    covers them) fails here. Only dimensions that vary across the task's shapes are
    drawn: a dimension every shape holds fixed (a head size, say) is part of the
    interface. Each is drawn log-uniformly between the task's smallest and largest
    value, keeping the element count within the largest selected shape's, so the
    evaluation costs no more than it already does. No drawn dimension takes a value any
    listed shape has: a candidate that special-cases the listed widths (a table of block
    sizes for 129, 1024, 8000, …) would pass on one of them (the range's ends are listed
    values, so a draw lands there now and then: CI saw it). A draw the task does not
    accept (`accepts`: an imported KernelBench problem whose sizes must divide each other)
    is drawn again, after 25 odd draws as multiples of ever larger powers of two; none
    accepted in 50 draws gives no unseen shape.
    """
    got = _ranges(task, selected)
    if got is None:
        return None
    names, lo, hi, varying, budget, listed = got
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    known = {s.label for s in every}
    rng = rng or _RNG
    fallback = None  # where every value in range is listed: at least a combination no file names
    for attempt in range(50):
        # Odd values first; a task that refused 25 odd draws (a KernelBench problem whose
        # sizes must be multiples of its group count) gets ever coarser multiples of two.
        grain = 1 << max(0, (attempt - 25) // 3 + 1) if attempt >= 25 else 0
        dims = {n: lo[n] for n in names}
        for n in rng.sample(varying, len(varying)):
            rest = numel({k: v for k, v in dims.items() if k != n})
            top = min(hi[n], budget // max(rest, 1))
            if top < lo[n]:
                return None
            v = round(math.exp(rng.uniform(math.log(lo[n]), math.log(top))))
            if grain:
                v = min(max(round(v / grain) * grain, grain), top)
                dims[n] = v if v >= lo[n] else lo[n]
            else:
                dims[n] = min(v | 1, top) if v | 1 <= top else v
        shape = Shape(dims=dims, weight=1.0, tag=TAG)
        if accepts is not None and not accepts(dims):
            continue
        if all(dims[n] not in listed[n] for n in varying):
            return shape
        if fallback is None and shape.label not in known:
            fallback = shape
    return fallback


_RNG = secrets.SystemRandom()
VALUE_CATEGORIES = ("wrong", "nonfinite", "trivial", "stochastic")


def judged_on(task: Task, plan) -> str:
    """What an evaluation's correctness checks ran on, for its verdict (the undeclared
    shapes counted, not named: a round's candidates share them)."""
    if task.spec.task.closed_shapes:
        return "judged on the declared shapes only: the task declares its shapes closed"
    n = len({c.shape.label for c in plan.calls if c.shape.tag == TAG})
    if not n:
        return "judged on the declared shapes only: no undeclared shape fits the task's ranges"
    return f"judged on the declared shapes and {n} undeclared shape(s) drawn for this evaluation"


def reason(shape: Shape, category: str, why: str) -> str:
    """A failed check's reason, led by what it means on an undeclared shape."""
    if shape.tag != TAG or category not in VALUE_CATEGORIES:
        return why
    rc = "×".join(str(v) for v in shape.dims.values())
    return (
        f"wrong on undeclared shape {rc}: a kernel must be correct for every shape the op "
        f"accepts ({why})"
    )


def numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n
