"""The oracle: does a mutant the gate accepted really behave differently?

A syntactic mutant may not change behaviour (a mask off by one inside padding, a term
that is zero on every input). So a survivor is judged again by the same sandboxed
evaluation under a thorough configuration the gate does not use: undeclared shapes
(from the smallest judged shape: its first dimension past 64 and not a multiple of 8,
and on the CPU every dimension doubled plus one), more random repeats and more dropout
rates. A survivor the oracle rejects is a gate gap; one it accepts too is a finding about
the task (its inputs cannot tell the mutant apart: strengthen the task). Both count as
survived (report.py): a mutant is left out of the kill rate only when proven equivalent.

A task whose shapes are closed (`[task] closed_shapes`, an imported KernelBench problem)
gets no undeclared shape: a kernel wrong only off its declared shapes is not wrong there.

The oracle is only trusted where the original kernel passes it: the original is judged
first (with the extra shapes, then without them if it fails there); if it fails both, the
oracle is unusable and its note says so (survivors count as survivors either way).
"""

from __future__ import annotations

import math
from dataclasses import replace

from kernelloop.task import Shape, Task

ORACLE_REPEATS = 3
ORACLE_RATES = (0.3, 0.9)


def first_dim_variant(dims: dict[str, int]) -> dict[str, int]:
    """The first dimension made >= 64 and not a multiple of 8 (67, or 2d + 3 past 64)."""
    first = next(iter(dims))
    d = dims[first]
    return {**dims, first: 67 if d < 64 else 2 * d + 3}


def oracle_shapes(task: Task, device: str, base: list[Shape]) -> list[Shape]:
    """Undeclared shapes derived from the smallest of `base` (the shapes the gate was run
    on): its first dimension past 64 and not a multiple of 8, and on the CPU every
    dimension doubled plus one. Two shapes, not two per declared shape: under the Triton
    interpreter the oracle's full run of the flagship with two per shape took over 20
    minutes on a loaded 2-core machine (2026-12-03)."""
    declared = [*task.spec.cpu_shapes, *task.spec.shapes]
    seen = {tuple(s.dims.items()) for s in declared}
    if not base or task.spec.task.closed_shapes:  # the op is defined at its shapes only
        return []
    small = min(base, key=lambda s: math.prod(s.dims.values()))
    variants = [first_dim_variant(small.dims)]
    if device == "cpu":  # doubling every dimension of a GPU shape costs minutes
        variants.append({k: 2 * v + 1 for k, v in small.dims.items()})
    extra: list[Shape] = []
    for dims in variants:
        key = tuple(dims.items())
        if key not in seen and task.accepts(dims):
            seen.add(key)
            extra.append(Shape(dims=dims, weight=small.weight, tag="oracle"))
    return extra


def oracle_task(task: Task, device: str, extra: list[Shape]) -> Task:
    """`task` judged more thoroughly (the module's docstring), with the `extra` shapes
    (oracle_shapes) among the device's; its files are unchanged."""
    spec = task.spec
    update: dict = {
        "suites": spec.suites.model_copy(
            update={"random_repeats": max(ORACLE_REPEATS, spec.suites.random_repeats)}
        ),
        # a survivor's judgement by the oracle may take a while; never cut short
        "rules": spec.rules.model_copy(
            update={"eval_timeout_s": max(spec.rules.eval_timeout_s, 1800.0)}
        ),
    }
    if spec.stochastic is not None:
        rates = sorted({*spec.stochastic.rates, *ORACLE_RATES})
        update["stochastic"] = spec.stochastic.model_copy(update={"rates": rates})
    if extra:
        key = "cpu_shapes" if device == "cpu" else "shapes"
        update[key] = [*getattr(spec, key), *extra]
    return replace(task, spec=spec.model_copy(update=update))
