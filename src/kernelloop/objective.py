"""The numbers of a run: the weighted geometric mean over the task's shape distribution,
the per-shape table of a benchmark, and the % of the roofline floor.

Every number the live view, the run summary, the MCP server and the report show comes
from here (or from the gate, which uses the same geometric mean); none of them computes
one of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from kernelloop.task import Task
from kernelloop.task.roofline import (
    REFERENCE_GPU,
    Ceiling,
    Floor,
    ceiling_for,
    floor_with,
    reference_ceiling,
)


def geomean(pairs: Iterable[tuple[float, float]]) -> float | None:
    """The weighted geometric mean of (weight, value) pairs; None without pairs. Every
    value must be positive (a speedup, a % of floor)."""
    pairs = list(pairs)
    total = sum(w for w, _ in pairs)
    if not pairs or total <= 0:
        return None
    return math.exp(sum(w * math.log(v) for w, v in pairs) / total)


def weighted_geomean(task: Task, per_shape: dict[str, float | None]) -> float | None:
    """Weighted geometric mean of per-shape values (speedups, % of floor) by the task's
    shape weights; shapes the task does not list and missing or non-positive values are
    left out."""
    weights = {s.label: s.weight for s in [*task.spec.shapes, *task.spec.cpu_shapes]}
    return geomean((weights[k], v) for k, v in per_shape.items() if k in weights and v and v > 0)


def shape_table(bench: BaseModel, gate: BaseModel | None) -> list[dict]:
    """Per shape of a benchmark (a BenchmarkRecord and the gate's GateResult): the
    candidate's median, the baseline's, the speedup over the baseline, the % of the
    roofline floor and which roof that floor is, memory or compute (what the run summary
    reports); where the benchmark timed the reference under torch.compile, its median and
    the speedup over it (evidence, never the gate's)."""
    gate_json = gate.model_dump(mode="json") if gate is not None else None
    return shape_rows(bench.model_dump(mode="json"), gate_json)


def shape_rows(bench: dict, gate: dict | None) -> list[dict]:
    """`shape_table` over stored JSON (a benchmark record and gate verdict as plain dicts);
    a field an older record lacks reads None."""
    shapes = (gate or {}).get("shapes") or []
    by_gate = {g.get("shape"): g for g in shapes if isinstance(g, dict)}
    rows = []
    for sb in bench.get("shapes") or []:
        impls = sb.get("impls") or {}
        cand, base = impls.get("candidate") or {}, impls.get("baseline") or {}
        compiled = impls.get("compiled") or {}
        g = by_gate.get(sb.get("shape")) or {}
        row = {
            "shape": sb.get("shape"),
            "dtype": sb.get("dtype"),
            "tag": sb.get("tag"),
            "weight": sb.get("weight"),
            "median_ms": cand.get("median_ms"),
            "baseline_ms": base.get("median_ms"),
            "floor_ms": sb.get("floor_ms"),
            "bound": sb.get("floor_bound"),
            "speedup_vs_baseline": g.get("speedup_vs_baseline"),
            "pct_of_floor": cand.get("pct_of_floor"),
            "noise_rel": sb.get("noise_rel"),
        }
        if compiled or sb.get("compiled_in_turn"):  # in turn: no median beside the others
            row["compiled_ms"] = compiled.get("median_ms")
            row["speedup_vs_compiled"] = sb.get("speedup_vs_compiled")
        rows.append(row)
    return rows


def floor_pct(task: Task, rows: list[dict]) -> float | None:
    """The weighted geometric mean of a shape table's % of floor (None without floors)."""
    return weighted_geomean(task, {r["shape"]: r["pct_of_floor"] for r in rows})


def floor_by_shape(rows: list[dict]) -> dict[str, float]:
    """Per shape, the % of the roofline floor where one is known (what the agent is told)."""
    return {r["shape"]: r["pct_of_floor"] for r in rows if r.get("pct_of_floor")}


@dataclass(frozen=True)
class Floors:
    """Per (GPU shape label, dtype), the roofline floor on `device` (the judged GPU, or
    the reference GPU with the reason where the judged device has no ceilings), and the
    ceilings it came from (None where neither has any)."""

    by_shape: dict[tuple[str, str], Floor]
    ceiling: Ceiling | None
    device: str


def floors(task: Task, dtypes: list[str], device: str, device_name: str) -> Floors:
    """The floors the contract quotes: the same `task/roofline.py` floors the evaluation's
    and the benchmark's % of floor use, on the judged GPU, or — where it has no ceilings
    (a CPU, a GPU the peak table lacks) — on the reference GPU, named in `device`."""
    on = device_name if device == "cuda" else ""
    ceiling = ceiling_for(on, task.spec.roofline.peaks) if on else None
    if ceiling is None:
        why = "no ceilings are known for this GPU" if on else "not this machine"
        ceiling = reference_ceiling(task)
        on = f"{REFERENCE_GPU}, {why}"
    if ceiling is None:
        return Floors({}, None, "")
    by_shape = {
        (s.label, d): floor_with(task, s, d, ceiling) for s in task.spec.shapes for d in dtypes
    }
    return Floors(by_shape, ceiling, on)
