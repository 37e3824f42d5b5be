"""Speedups from an evaluation's interleaved timings, and the interim performance decision.

Every ratio here comes from implementations timed side by side in one worker on the
same inputs (candidate, current best, baseline), never from numbers of different runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kernelloop.evaluate.record import EvaluationRecord
from kernelloop.task import Task


@dataclass
class Speedups:
    vs_baseline: dict[str, float] = field(default_factory=dict)
    vs_best: dict[str, float] = field(default_factory=dict)
    pct_of_floor: dict[str, float] = field(default_factory=dict)
    candidate_ms: dict[str, float] = field(default_factory=dict)


def speedups(record: EvaluationRecord) -> Speedups:
    by: dict[tuple[str, str], float] = {(t.impl, t.shape): t.median_ms for t in record.timings}
    out = Speedups()
    for (impl, shape), ms in by.items():
        if impl != "candidate" or ms <= 0:
            continue
        out.candidate_ms[shape] = ms
        if (b := by.get(("baseline", shape))) is not None:
            out.vs_baseline[shape] = b / ms
        if (b := by.get(("best", shape))) is not None:
            out.vs_best[shape] = b / ms
    for t in record.timings:
        if t.impl == "candidate" and t.pct_of_floor is not None:
            out.pct_of_floor[t.shape] = t.pct_of_floor
    return out


def weighted_geomean(task: Task, per_shape: dict[str, float]) -> float | None:
    """The objective: the weighted geometric mean of per-shape ratios over the task's shapes."""
    weights = {s.label: s.weight for s in [*task.spec.shapes, *task.spec.cpu_shapes]}
    pairs = [(weights[k], v) for k, v in per_shape.items() if k in weights and v > 0]
    if not pairs:
        return None
    total = sum(w for w, _ in pairs)
    return math.exp(sum(w * math.log(v) for w, v in pairs) / total)


@dataclass
class PerfDecision:
    accepted: bool
    reasons: list[str]
    objective_vs_best: float | None


def decide(task: Task, record: EvaluationRecord, sp: Speedups) -> PerfDecision:
    """Correct, measured where timings count, and faster than the best without regressions."""
    rules = task.spec.rules
    if not record.verdict.accepted:
        return PerfDecision(False, [f"rejected ({record.verdict.category})", *record.verdict.reasons[:3]], None)
    if not record.timings_count:
        return PerfDecision(False, ["correct, but timings on this device do not count (interpreter): "
                                    "a speedup can only be accepted from GPU measurements"], None)
    if not sp.vs_best:
        return PerfDecision(False, ["no benchmark record against the current best: no record, no merge"], None)
    obj = weighted_geomean(task, sp.vs_best)
    reasons: list[str] = []
    tags = {s.label: s.tag for s in task.spec.shapes}
    for shape, r in sp.vs_best.items():
        if r < 1.0 - rules.max_shape_regression:
            reasons.append(f"{shape} regressed {1 / r - 1:.1%} against the best (limit {rules.max_shape_regression:.0%})")
    for shape, r in sp.vs_baseline.items():
        if tags.get(shape) == "long_tail" and r < rules.long_tail_floor:
            reasons.append(f"long-tail shape {shape} is {r:.2f}x the baseline, under the floor {rules.long_tail_floor:.2f}x")
    need = 1.0 + rules.min_gain
    if obj is None or obj < need:
        reasons.append(f"objective {obj or 0:.4f}x over the best is under the required {need:.4f}x")
    return PerfDecision(not reasons, reasons or [f"{obj:.3f}x over the best"], obj)
