"""The profile summary a model reads: compact plain text, per kernel, with roofline and deltas.

Budget: at most 1,500 tokens per kernel (tokens estimated as characters / 4). CudaForge
found the full Nsight Compute metric set stalls a model while a curated couple of dozen
helps; the summary therefore names each number once, in words, with its unit.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelloop.evaluate.trusted.values.record import KernelInfo
from kernelloop.profile.deltas import MetricDelta, fact_deltas, fmt_bytes, profile_deltas
from kernelloop.profile.fallback import CompileFact, KernelTiming
from kernelloop.profile.metrics import KernelProfile
from kernelloop.profile.roofline import H200, Ceilings, Classification, Roofline, classify, roofline

TOKENS_PER_KERNEL = 1500
CHARS_PER_TOKEN = 4

# What only hardware counters can tell; listed when the summary comes from a fallback.
COUNTER_ONLY = (
    "DRAM/L1/L2 traffic and hit rates",
    "achieved occupancy",
    "pipe utilization",
    "warp stall reasons",
    "instruction mix",
    "bank conflicts",
    "profiler rule hints",
)


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class ProfileReport(BaseModel):
    """Everything profile/ knows about one candidate; JSON goes into the evaluation record."""

    candidate: str = ""
    source: Literal["ncu", "fallback"]
    device: str | None = None
    kernels: list[KernelProfile] = Field(default_factory=list)
    classifications: list[Classification] = Field(
        default_factory=list, description="one per kernel"
    )
    roofline: Roofline | None = None
    time_source: str = ""
    min_bytes: float | None = None
    total_dram_bytes: float | None = None
    traffic_ratio: float | None = Field(
        default=None, description="total DRAM bytes / task's minimal bytes"
    )
    memory_floor_s: float | None = Field(
        default=None, description="minimal bytes / the device's DRAM ceiling"
    )
    ceiling_device: str = ""
    compile_facts: list[CompileFact] = Field(default_factory=list)
    timings: list[KernelTiming] = Field(default_factory=list)
    deltas: list[MetricDelta] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)

    @property
    def regressions(self) -> list[MetricDelta]:
        return [d for d in self.deltas if d.regression and d.secondary]

    def kernel_infos(self) -> list[KernelInfo]:
        """Per-kernel facts in the evaluation record's shape; from compile facts,
        n_spills = spill-store bytes."""
        if self.kernels:
            return [
                KernelInfo(
                    name=k.name,
                    n_regs=int(k.registers_per_thread) if k.registers_per_thread else None,
                    shared_bytes=int((k.smem_static_bytes or 0) + (k.smem_dynamic_bytes or 0)),
                    num_warps=(k.block_threads // 32) if k.block_threads else None,
                    launches=1,
                    source="profiler",
                )
                for k in self.kernels
            ]
        return [
            KernelInfo(
                name=f.name,
                n_regs=f.n_regs,
                n_spills=f.spill_store_bytes,
                shared_bytes=f.shared_bytes,
                num_warps=f.num_warps,
                launches=f.launches,
                source="triton-compile",
            )
            for f in self.compile_facts
        ]

    def agent_metrics(self) -> dict[str, float | str]:
        """Flat metrics of the longest kernel for AgentContext.profile_metrics (the tuner's
        rule names)."""
        out: dict[str, float | str] = {}
        if self.kernels:
            k, c = max(
                zip(self.kernels, self.classifications, strict=False),
                key=lambda kc: kc[0].duration_us or 0.0,
            )
            for name in (
                "registers_per_thread",
                "achieved_occupancy_pct",
                "theoretical_occupancy_pct",
                "dram_throughput_pct",
                "waves_per_sm",
                "issue_slots_busy_pct",
                "l2_hit_pct",
                "duration_us",
            ):
                if getattr(k, name) is not None:
                    out[name] = getattr(k, name)
            if k.occupancy_limiter:
                out["occupancy_limiter"] = k.occupancy_limiter
            if k.local_store_sectors is not None:
                out["spills"] = k.local_store_sectors
            for pipe in ("alu", "fma", "fmaheavy", "lsu", "xu", "tensor"):
                if k.pipe(pipe) is not None:
                    out[f"{pipe}_pipe_pct"] = k.pipe(pipe)  # type: ignore[assignment]
            stalls = k.top_stalls(1)
            if stalls:
                out["top_stall"] = stalls[0][0]
            out["bound"] = c.bound
        elif self.compile_facts:
            f = max(self.compile_facts, key=lambda f: f.n_regs or 0)
            if f.n_regs is not None:
                out["registers_per_thread"] = f.n_regs
            if f.spill_store_bytes is not None:
                out["spills"] = f.spill_store_bytes
            occ = f.occupancy()
            if occ is not None:
                out["theoretical_occupancy_pct"] = occ.theoretical_pct
                out["occupancy_limiter"] = occ.limiter
        out["kernels_per_call"] = len(self.kernels) or len(self.compile_facts)
        if self.roofline is not None:
            out["pct_of_floor"] = self.roofline.pct_of_floor
        return out

    def to_record(self, *, include_raw: bool = False) -> dict:
        """JSON-ready dict for the evaluation record (raw ncu rows only when asked:
        ~50 KB/kernel)."""
        data = self.model_dump(mode="json")
        if include_raw:
            for kd, k in zip(data["kernels"], self.kernels, strict=True):
                kd["raw"] = [m.model_dump(mode="json") for m in k.raw]
        return data


def summarize(
    profiles: list[KernelProfile],
    parent: ProfileReport | list[KernelProfile] | None = None,
    *,
    min_bytes: float | None = None,
    min_flops: float = 0.0,
    measured_time_s: float | None = None,
    ceilings: Ceilings = H200,
    flop_kind: str = "fp32",
    compile_facts: list[CompileFact] | None = None,
    timings: list[KernelTiming] | None = None,
    missing: list[str] | None = None,
    candidate: str = "",
    device: str | None = None,
) -> ProfileReport:
    """Build the report. `measured_time_s` is the benchmark's median for the profiled shape;
    without it the sum of the profiled kernel durations stands in (ncu timing of one call)."""
    missing = list(missing or [])
    time_source = "benchmark median"
    if measured_time_s is None:
        durs = [k.duration_us for k in profiles]
        if profiles and None not in durs:
            measured_time_s = sum(durs) * 1e-6  # type: ignore[arg-type]
            time_source = "sum of profiled kernel durations"
        elif timings:
            measured_time_s = sum(t.total_us for t in timings) * 1e-6
            time_source = "torch.profiler kernel time"
    model = None
    if min_bytes is not None and measured_time_s:
        model = roofline(min_bytes, min_flops, measured_time_s, ceilings, flop_kind=flop_kind)
    elif min_bytes is None:
        missing.append("roofline: the task gives no bytes/flops model")
    else:
        missing.append("% of floor: no GPU time was measured")
    classes = [classify(k, model if len(profiles) == 1 else None) for k in profiles]
    if not profiles:
        classes = [classify(None, model)]
    total = None
    byte_list = [k.dram_bytes for k in profiles]
    if profiles and None not in byte_list:
        total = sum(byte_list)  # type: ignore[arg-type]
    parent_kernels = parent.kernels if isinstance(parent, ProfileReport) else parent
    deltas = profile_deltas(parent_kernels, profiles) if parent_kernels and profiles else []
    if (
        isinstance(parent, ProfileReport)
        and not parent_kernels
        and not profiles
        and parent.compile_facts
        and compile_facts
    ):
        deltas = fact_deltas(parent.compile_facts, list(compile_facts))
    elif parent is not None and not parent_kernels:
        missing.append("deltas: the parent has no profiler counters")
    if not profiles:
        for item in COUNTER_ONLY:
            if item not in missing:
                missing.append(item)
    return ProfileReport(
        candidate=candidate,
        source="ncu" if profiles else "fallback",
        device=device,
        kernels=profiles,
        classifications=classes,
        roofline=model,
        time_source=time_source if model else "",
        min_bytes=min_bytes,
        total_dram_bytes=total,
        traffic_ratio=(total / min_bytes) if total is not None and min_bytes else None,
        memory_floor_s=(min_bytes / ceilings.dram_bytes_per_s) if min_bytes else None,
        ceiling_device=ceilings.device,
        compile_facts=list(compile_facts or []),
        timings=list(timings or []),
        deltas=deltas,
        missing=missing,
    )


__all__ = ["ProfileReport", "summarize", "estimate_tokens", "fmt_bytes", "TOKENS_PER_KERNEL"]
