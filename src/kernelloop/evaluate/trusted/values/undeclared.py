"""Shapes no file names, drawn per evaluation from the plan's secret `Seeds` (plan.py).

A kernel must be correct for every shape its op accepts, not only for the declared ones.
Two draws, each judged once (random inputs, one dtype drawn too):

- the *tile* shape: every dimension that varies across the task's shapes and can pass
  one tile of 128 (TILE; of 64 where its range stops below 129) gets an odd value just
  above it where the budget allows, the others an odd value near their smallest. An odd
  count ≥ 129 is no multiple of 8, 16, 32, 64 or 128 and is past 128, so a kernel that
  skips the last partial tile, handles only even widths, or launches at most 128
  programs fails here. Before, every CPU shape of the flagship had fewer than 64 rows and
  a kernel correct only for rows that are a multiple of 64 was accepted on the CPU (issue
  33); then the tile stopped at 97 rows and one wrong for rows ≥ 128 was (issue 45).
  Its values stay just past one tile: under the Triton interpreter a call costs ~20 ms
  per program (a 193x129 call of fused_naive took ~4.9 s on the 2-core CPU, 2026-12-07),
  so rows are a few hundred at most and the other dimensions small.
- the *wide* shape (`unseen_shape`): drawn log-uniformly over the task's own ranges up to
  the largest selected shape's element count, odd where it can be, no dimension at a
  listed value: code specialised to the listed sizes fails here.

- the *reach* shapes (`reach_shapes`): one per varying dimension whose declared maximum
  the draws above do not reach, with that dimension at the most the budget allows (its
  declared maximum where it fits) and the others at their smallest: short-wide (3×32768
  on the flagship's CPU: the interpreter's cost is per program, so few rows are cheap)
  and, where the budget holds it, tall-narrow (65536×129 on a GPU). What no draw reaches
  is said in the verdict (`judged_on`): "judged up to R×C on this machine" (issue 45 wrote
  "accepted"; one vocabulary, issue 47, keeps that word out of every verdict).

A task that declares its shapes closed (`[task] closed_shapes`, docs/task.md) gets none.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Callable

from kernelloop.task import Shape, Task
from kernelloop.task.adhoc import AD_HOC

TILE = 128  # the largest tile a count must not be a multiple of: odd values past it clear all
SMALL_TILE = 64  # a dimension whose range stops below TILE + 1 is drawn past this one
TAG = "undeclared"  # the drawn shapes' tag (Shape.tag)
TILE_CAP = 1 << 20  # elements: the tile shape's floor never asks for more
# Elements a reach shape may hold where the selected shapes are smaller (the CPU's): 3×32768
# fits. Its leading dimensions (all but the last: the programs of a row-wise kernel, each
# ~20 ms under the interpreter) stay within the selected shapes' own leading product.
REACH_NUMEL = 1 << 17


def undeclared_shapes(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> list[Shape]:
    """The evaluation's undeclared shapes (the tile one, the wide one, then the reach
    ones), none for a task whose shapes are closed. `rng`: the plan's secret generator."""
    drawn, reach = draws(task, selected, rng, accepts)
    return [*drawn, *reach]


def draws(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
) -> tuple[list[Shape], list[Shape]]:
    """(the tile and wide shapes, the reach shapes) of one evaluation, no label twice."""
    if task.spec.task.closed_shapes or not selected:
        return [], []
    rng = rng or _RNG
    out: list[Shape] = []
    for draw in (tile_shape, unseen_shape):
        shape = draw(task, selected, rng, accepts)
        if shape is not None and shape.label not in {s.label for s in out}:
            out.append(shape)
    reach = [
        s
        for s in reach_shapes(task, selected, rng, accepts, out)
        if s.label not in {o.label for o in out}
    ]
    return out, reach


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
    """Every varying dimension odd; those whose range passes SMALL_TILE drawn in
    [max(lo, TILE+1), 1.5 × that] (SMALL_TILE+1 where the range stops below TILE+1) in a
    secret order while the element count stays within
    the largest selected shape's (at least twice the smallest all-tall shape, up to
    TILE_CAP), the rest (and any that no longer fit) in [lo, 2 lo].
    A dimension every declared shape holds fixed (a head size) is the interface: kept.
    None where no varying dimension can pass TILE within the budget."""
    got = _ranges(task, selected)
    if got is None:
        return None
    names, lo, hi, varying, budget, listed = got
    rng = rng or _RNG
    tall = [n for n in varying if hi[n] > SMALL_TILE]
    if not tall:
        return None
    past = {n: max(lo[n], (TILE if hi[n] > TILE else SMALL_TILE) + 1) for n in tall}
    # Room for every tall dimension past one tile even where the selected shapes are
    # smaller (a test's single 7x129 shape): twice the smallest such shape, within TILE_CAP.
    floor = numel({n: past[n] if n in tall else lo[n] for n in names})
    budget = max(budget, min(2 * floor, TILE_CAP))
    for _ in range(50):
        dims = {n: lo[n] for n in names}
        for n in rng.sample(tall, len(tall)):
            a = past[n]
            top = min(hi[n], a + a // 2, budget // max(numel(dims) // dims[n], 1))
            if top < a:
                continue  # past the budget with the tall ones drawn so far: kept low
            dims[n] = _odd_in(rng, a, top)
        if all(dims[n] < past[n] for n in tall):
            return None  # not even one fits: the budget is below one tile's rows
        for n in varying:
            if n in tall and dims[n] >= past[n]:
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


def reach_shapes(
    task: Task,
    selected: list[Shape],
    rng: random.Random | None = None,
    accepts: Callable[[dict[str, int]], bool] | None = None,
    drawn: list[Shape] = (),
) -> list[Shape]:
    """Per varying dimension, shapes with the others at their smallest (odd where that
    still fits) and it at: the most the budget allows (its declared maximum where it
    fits) unless a selected or `drawn` shape already reaches that; and an odd value drawn
    between half that and it (above 16384 columns on the flagship: no block's multiple).
    The budget is the largest selected shape's element count, at least REACH_NUMEL, and
    its leading dimensions' product (all but the last) at most the selected shapes' own,
    so under the interpreter a reach shape launches no more programs than a declared one:
    on the CPU the flagship gets 3×32768 and 3×(16385..32767) (its rows stop at the tile
    shape's), on a GPU 3×(16385..32767) and (32769..65535)×129. A value the task does not
    accept is rounded down to ever larger powers of two. None for a dimension the budget
    keeps below 1.5 tiles (the tile shape reaches that)."""
    got = _ranges(task, selected)
    if got is None:
        return []
    names, lo, hi, varying, budget, listed = got
    rng = rng or _RNG
    seen = [*selected, *drawn]
    known = {s.label for s in [*task.spec.shapes, *task.spec.cpu_shapes]}
    elems = max(budget, REACH_NUMEL)
    lead = max(_lead(s.dims) for s in selected)
    out: list[Shape] = []
    for n in rng.sample(varying, len(varying)):
        for odd in (True, False):
            dims = {
                k: (lo[k] | 1 if odd and k != n and lo[k] | 1 <= hi[k] else lo[k]) for k in names
            }
            top = _top(dims, n, hi[n], elems, lead)
            if top >= hi[n]:
                break
        if top <= TILE + TILE // 2:
            continue  # the tile shape reaches as far
        values = [_odd_in(rng, max(top // 2, TILE + TILE // 2) + 1, top - 1)]
        if max(s.dims[n] for s in seen) < top:
            values.insert(0, top)  # the most the budget allows: the declared maximum if it fits
        for value in values:
            if value in listed[n] and value != top:
                continue
            for grain in (1, *(1 << g for g in range(1, 11))):
                dims[n] = value // grain * grain
                if dims[n] <= TILE + TILE // 2:
                    break  # rounded down past what the tile shape reaches
                shape = Shape(dims=dict(dims), weight=1.0, tag=TAG)
                if shape.label in known:
                    continue
                if accepts is None or accepts(dims):
                    out.append(shape)
                    break
    return out


def _top(dims: dict[str, int], n: str, hi: int, elems: int, lead: int) -> int:
    """The largest value of `n` within the element and leading-product budgets."""
    rest = numel({k: v for k, v in dims.items() if k != n})
    top = min(hi, elems // max(rest, 1))
    if n != list(dims)[-1]:
        top = min(top, lead * dims[n] // max(_lead(dims), 1))
    return top


def _lead(dims: dict[str, int]) -> int:
    """The product of every dimension but the last (a row-wise kernel's programs)."""
    return numel(dict(list(dims.items())[:-1])) if len(dims) > 1 else 1


def reached(task: Task, plan) -> dict[str, tuple[int, int]]:
    """{dimension: (the largest value any call of `plan` judged, the declared maximum)}
    for each dimension the plan stops short of; empty where every one is reached."""
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    names = list(every[0].dims) if every else []
    if not plan.calls or any(list(s.dims) != names for s in every):
        return {}
    judged = [c.shape.dims for c in plan.calls if list(c.shape.dims) == names]
    out = {}
    for n in names:
        top, declared = max((d[n] for d in judged), default=0), max(s.dims[n] for s in every)
        if top < declared:
            out[n] = (top, declared)
    return out


_RNG = secrets.SystemRandom()
VALUE_CATEGORIES = ("wrong", "nonfinite", "trivial", "stochastic")


def _selected(plan) -> str:
    """The shapes an evaluation was asked for, in words: the task's declared ones, the ones
    given with `--shapes` that the task does not declare (an ad-hoc run once said "the
    declared shapes only", issue 46), or both."""
    given = sorted({c.shape.label for c in plan.calls if c.shape.tag == AD_HOC})
    declared = any(c.shape.tag not in (TAG, AD_HOC) for c in plan.calls if c.suite != "e2e")
    if not given:
        return "the declared shapes"
    named = f"the shape{'s' if len(given) > 1 else ''} given ({', '.join(given)})"
    return f"the declared shapes and {named}" if declared else named


def judged_on(task: Task, plan) -> str:
    """What an evaluation's correctness checks ran on, for its verdict (the undeclared
    shapes counted, not named: a round's candidates share them)."""
    on = _selected(plan)
    if task.spec.task.closed_shapes:
        return f"judged on {on} only: the task declares its shapes closed"
    n = len({c.shape.label for c in plan.calls if c.shape.tag == TAG})
    if not n:
        return f"judged on {on} only: no undeclared shape fits the task's ranges"
    line = f"judged on {on} and {n} undeclared shape(s) drawn for this evaluation"
    line += f"; {plan.note}" if getattr(plan, "note", "") else ""
    short = reached(task, plan)
    if not short:
        return line
    names = list((task.spec.shapes or task.spec.cpu_shapes)[0].dims)
    judged = [c.shape.dims for c in plan.calls if list(c.shape.dims) == names]
    tops = {n: max(d[n] for d in judged) for n in names}
    upto = "×".join(str(v) for v in tops.values())
    dims = "×".join(tops)
    missed = ", ".join(f"{n} up to {d} declared, {t} reached" for n, (t, d) in short.items())
    return (
        f"{line}; judged up to {upto} ({dims}) on this machine, not every declared size "
        f"({missed}: past this machine's budget; judge on a larger device to reach them)"
    )


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
