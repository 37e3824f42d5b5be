"""The objective: a weighted geometric mean over the task's shape distribution."""

from __future__ import annotations

import math

from kernelloop.task import Task


def weighted_geomean(task: Task, per_shape: dict[str, float]) -> float | None:
    """Weighted geometric mean of per-shape values (speedups, % of floor) by the task's shape weights."""
    weights = {s.label: s.weight for s in [*task.spec.shapes, *task.spec.cpu_shapes]}
    pairs = [(weights[k], v) for k, v in per_shape.items() if k in weights and v and v > 0]
    if not pairs:
        return None
    total = sum(w for w, _ in pairs)
    return math.exp(sum(w * math.log(v) for w, v in pairs) / total)
