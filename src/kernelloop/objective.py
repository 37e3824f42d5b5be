"""The numbers of a run: the weighted geometric mean over the task's shape distribution,
the per-shape table of a benchmark, and the % of the roofline floor.

Every number the live view, the run summary, the MCP server and the report show comes
from here (or from the gate, which uses the same geometric mean); none of them computes
one of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel

from kernelloop.task import Task


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
    candidate's median, the baseline's, the speedup over the baseline and the % of the
    minimal-traffic floor (what the run summary reports)."""
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
        g = by_gate.get(sb.get("shape")) or {}
        rows.append(
            {
                "shape": sb.get("shape"),
                "dtype": sb.get("dtype"),
                "tag": sb.get("tag"),
                "weight": sb.get("weight"),
                "median_ms": cand.get("median_ms"),
                "baseline_ms": base.get("median_ms"),
                "floor_ms": sb.get("floor_ms"),
                "speedup_vs_baseline": g.get("speedup_vs_baseline"),
                "pct_of_floor": cand.get("pct_of_floor"),
                "noise_rel": sb.get("noise_rel"),
            }
        )
    return rows


def floor_pct(task: Task, rows: list[dict]) -> float | None:
    """The weighted geometric mean of a shape table's % of floor (None without floors)."""
    return weighted_geomean(task, {r["shape"]: r["pct_of_floor"] for r in rows})


def floor_by_shape(rows: list[dict]) -> dict[str, float]:
    """Per shape, the % of the roofline floor where one is known (what the agent is told)."""
    return {r["shape"]: r["pct_of_floor"] for r in rows if r.get("pct_of_floor")}


# Where a floor is quoted when the judged device has no measured DRAM ceiling (a CPU run):
# the device the task's speed is measured on in this project.
FLOOR_REFERENCE_DEVICE = "NVIDIA H200"


def floors_ms(
    task: Task, dtypes: list[str], device: str, device_name: str
) -> tuple[dict[tuple[str, str], float], float | None, str]:
    """Per (GPU shape label, dtype), the roofline floor time in ms: the task's minimal bytes
    over the judged device's measured DRAM ceiling — the same ceiling the evaluation's
    % of floor uses (evaluate/trusted/run.py) — or, where the judged device has none (a
    CPU), over the reference device's, named in the returned device text. Returns
    (floors, ceiling in bytes/s, the device the floors are for)."""
    from kernelloop.evaluate.trusted.run import dram_ceiling

    on = device_name if device == "cuda" else ""
    ceiling = dram_ceiling(on) if on else None
    if ceiling is None:
        why = "no DRAM ceiling is measured for this GPU" if on else "not this machine"
        on = f"{FLOOR_REFERENCE_DEVICE}, {why}"
        ceiling = dram_ceiling(FLOOR_REFERENCE_DEVICE)
    if ceiling is None:
        return {}, None, ""
    floors = {
        (s.label, d): task.min_bytes(s, d) / ceiling * 1e3 for s in task.spec.shapes for d in dtypes
    }
    return floors, ceiling, on
