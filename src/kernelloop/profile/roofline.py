"""Roofline: how far a measured time is from the floor the task's bytes/flops model allows,
and which unit bounds the kernel according to the profiler's own speed-of-light numbers.

The byte model alone cannot tell a memory-bound kernel from one that merely moves few
bytes slowly: a naive fused LayerNorm→softmax→dropout kernel with a Philox `tl.rand` per
element ran at 23% of the DRAM floor on the H200 while ncu showed DRAM at ~20% of peak and
the ALU pipe busiest (shared/GPU.md). So the classification uses ncu's memory and compute
SOL % (and pipe utilization) when they exist, and the byte model only as a fallback.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelloop.profile.metrics import KernelProfile, pipe_label
from kernelloop.task.roofline import Ceiling as TaskCeiling
from kernelloop.task.roofline import rate_of

Bound = Literal["memory-bound", "compute-bound", "latency-bound", "unknown"]

# ncu's SOLBottleneck rule calls throughput under 60% of peak on both memory and compute
# a latency problem; we use the same line so our words agree with its hints.
LATENCY_SOL_PCT = 60.0


class Ceilings(BaseModel):
    """What one device can sustain, as measured (not datasheet) where we have numbers."""

    device: str
    dram_bytes_per_s: float
    flops_per_s: dict[str, float] = Field(description="by kind: 'fp32', 'bf16_tensor', ...")
    source: str = ""


# The default of `roofline()`/`summarize()` called without ceilings (tests, fixtures).
# `kernelloop profile` passes the task's ceilings from the peak table instead
# (task/peaks.toml through `from_task_ceiling`), the same the evaluation's floor uses.
# H200 as measured for this project (shared/GPU.md, 2026-11-29): torch.add(x, r, out=o)
# moving 6 bytes/element ran at 4.27 TB/s, the floor any op that reads two tensors and
# writes one can reach. The flop ceilings (dense bf16 tensor core, fp32 FMA) are the
# project's working numbers, below the datasheet's 989 / 67 TFLOP/s; not yet measured here.
H200 = Ceilings(
    device="NVIDIA H200",
    dram_bytes_per_s=4.27e12,
    flops_per_s={"bf16_tensor": 790e12, "fp32": 60e12},
    source="shared/GPU.md: torch.add floor 4.27 TB/s; bf16 matrix ~790 TFLOP/s; fp32 ~60 TFLOP/s",
)


def from_task_ceiling(c: TaskCeiling) -> Ceilings:
    """The profiler's ceilings from the task's peak table (flop kinds are dtype names)."""
    return Ceilings(
        device=c.table_name or c.device,
        dram_bytes_per_s=c.dram_bytes_per_s,
        flops_per_s={k: rate_of(c, k) or r for k, r in c.flops_per_s.items()},
        source=c.source,
    )


class Roofline(BaseModel):
    min_bytes: float
    min_flops: float
    flop_kind: str
    measured_time_s: float
    memory_floor_s: float
    compute_floor_s: float
    floor_s: float
    pct_of_floor: float = Field(
        description="floor time / measured time × 100 (100 = at the roofline)"
    )
    model_bound: Literal["memory", "compute"]
    arithmetic_intensity: float | None = Field(description="min flops per min byte")
    achieved_min_bytes_per_s: float


def roofline(
    min_bytes: float,
    min_flops: float,
    measured_time_s: float,
    ceilings: Ceilings = H200,
    *,
    flop_kind: str = "fp32",
) -> Roofline:
    """The floor from the task's minimal bytes/flops and the device ceilings, vs a measured time."""
    if measured_time_s <= 0:
        raise ValueError(f"measured_time_s must be positive, got {measured_time_s}")
    if min_flops > 0 and flop_kind not in ceilings.flops_per_s:
        raise ValueError(
            f"no {flop_kind!r} ceiling for {ceilings.device}; have {sorted(ceilings.flops_per_s)}"
        )
    mem_s = min_bytes / ceilings.dram_bytes_per_s
    comp_s = min_flops / ceilings.flops_per_s[flop_kind] if min_flops > 0 else 0.0
    floor_s = max(mem_s, comp_s)
    return Roofline(
        min_bytes=min_bytes,
        min_flops=min_flops,
        flop_kind=flop_kind,
        measured_time_s=measured_time_s,
        memory_floor_s=mem_s,
        compute_floor_s=comp_s,
        floor_s=floor_s,
        pct_of_floor=100.0 * floor_s / measured_time_s,
        model_bound="memory" if mem_s >= comp_s else "compute",
        arithmetic_intensity=(min_flops / min_bytes) if min_bytes > 0 else None,
        achieved_min_bytes_per_s=min_bytes / measured_time_s,
    )


class Classification(BaseModel):
    bound: Bound
    memory_pct: float | None = None
    compute_pct: float | None = None
    busiest_pipe: str | None = None
    evidence: str


def classify(kernel: KernelProfile | None, model: Roofline | None = None) -> Classification:
    """Memory-, compute- or latency-bound, from ncu's SOL numbers; the byte model as fallback."""
    if kernel is not None:
        mem = _max(
            kernel.memory_sol_pct,
            kernel.dram_throughput_pct,
            kernel.l1_throughput_pct,
            kernel.l2_throughput_pct,
        )
        busiest = kernel.busiest_pipe()
        comp = _max(
            kernel.compute_sol_pct, busiest[1] if busiest else None, kernel.issue_slots_busy_pct
        )
        if mem is not None or comp is not None:
            m, c = mem or 0.0, comp or 0.0
            pipe = f"; busiest pipe {pipe_label(busiest[0])} {busiest[1]:.0f}%" if busiest else ""
            mem_unit = _argmax(
                {
                    "ncu memory throughput": kernel.memory_sol_pct,
                    "DRAM": kernel.dram_throughput_pct,
                    "L1/TEX": kernel.l1_throughput_pct,
                    "L2": kernel.l2_throughput_pct,
                }
            )
            comp_unit = _argmax(
                {
                    "ncu compute throughput": kernel.compute_sol_pct,
                    "busiest pipe": busiest[1] if busiest else None,
                    "issue slots": kernel.issue_slots_busy_pct,
                }
            )
            # Each number names its unit: "memory SOL 82%" beside "DRAM 71% of peak"
            # read as a contradiction until it said which memory unit was at 82%.
            facts = (
                f"memory SOL {m:.0f}% (busiest memory unit, % of its peak throughput: "
                f"{mem_unit}), compute SOL {c:.0f}% (% of peak: {comp_unit}){pipe}"
            )
            if max(m, c) < LATENCY_SOL_PCT:
                bound: Bound = "latency-bound"
                why = (
                    f"neither unit reaches {LATENCY_SOL_PCT:.0f}% of peak: "
                    f"warps wait{_why_waiting(kernel)}"
                )
            elif m >= c:
                bound, why = "memory-bound", "the memory system is the busiest unit"
            else:
                bound, why = "compute-bound", "the SM pipes are busier than the memory system"
            return Classification(
                bound=bound,
                memory_pct=mem,
                compute_pct=comp,
                busiest_pipe=busiest[0] if busiest else None,
                evidence=f"{facts} ({why}; profiler counters)",
            )
    if model is not None:
        if model.pct_of_floor >= LATENCY_SOL_PCT:
            bound = "memory-bound" if model.model_bound == "memory" else "compute-bound"
            return Classification(
                bound=bound,
                evidence=(
                    f"{model.pct_of_floor:.0f}% of the {model.model_bound} floor from the task's "
                    "model (no profiler counters)"
                ),
            )
        return Classification(
            bound="unknown",
            evidence=(
                f"only {model.pct_of_floor:.0f}% of the {model.model_bound} floor and no profiler "
                "counters: the time goes somewhere the byte/flop model does not see (latency, "
                "extra traffic or ALU work)"
            ),
        )
    return Classification(
        bound="unknown",
        evidence="no profiler counters and no measured time to hold against the floor",
    )


def _why_waiting(k: KernelProfile) -> str:
    """What keeps latency exposed: few warps to switch between, and the top stall."""
    parts = []
    if k.achieved_occupancy_pct is not None:
        limiter = (
            f", limited by {k.occupancy_limiter}"
            if k.occupancy_limiter and (k.theoretical_occupancy_pct or 100.0) < 99.5
            else ""
        )
        parts.append(f"{k.achieved_occupancy_pct:.0f}% occupancy{limiter}")
    if k.eligible_warps_per_scheduler is not None:
        parts.append(f"{k.eligible_warps_per_scheduler:.2f} eligible warps per scheduler")
    stalls = k.top_stalls(1)
    if stalls:
        parts.append(f"top stall {stalls[0][0]}")
    return " (" + ", ".join(parts) + ")" if parts else " (see stalls)"


def _argmax(vals: dict[str, float | None]) -> str:
    """The name of the largest known value ("n/a" when none is known)."""
    known = {k: v for k, v in vals.items() if v is not None}
    return max(known, key=lambda k: known[k]) if known else "n/a"


def _max(*vals: float | None) -> float | None:
    known = [v for v in vals if v is not None]
    return max(known) if known else None
