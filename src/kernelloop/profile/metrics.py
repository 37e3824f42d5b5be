"""Typed metrics per kernel, taken from ncu's output; units are in the field names.

Each field is looked up first by ncu's internal metric name (stable across versions,
requested explicitly by ncu_driver.DEFAULT_METRICS) and then by the section's display
label, so a report captured without those extra metrics still fills most fields.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from kernelloop.profile.ncu_csv import RawKernel, RawMetric, RuleHint, parse_raw_kernels

SOL = "GPU Speed Of Light Throughput"
LAUNCH = "Launch Statistics"
OCC = "Occupancy"
MEM = "Memory Workload Analysis"
COMPUTE = "Compute Workload Analysis"
SCHED = "Scheduler Statistics"
WARP = "Warp State Statistics"
INSTR = "Instruction Statistics"

_STALL = re.compile(r"^smsp__average_warps_issue_stalled_([a-z0-9_]+)_per_issue_active\.ratio$")
_PIPE_INST = re.compile(r"^sm__inst_executed_pipe_([a-z0-9_]+)\.avg\.pct_of_peak_sustained_active$")
_PIPE_CYC = re.compile(r"^sm__pipe_([a-z0-9_]+)_cycles_active\.avg\.pct_of_peak_sustained_active$")
_OP_MIX = re.compile(r"^smsp__sass_thread_inst_executed_op_([a-z0-9_]+)_pred_on\.sum$")

# Stall reasons that are bookkeeping, not a cause to act on: "selected" is the issuing
# cycle itself and "not_selected" means another eligible warp issued (enough warps).
_STALL_IGNORED = {"not_issued", "selected", "issued", "not_selected"}

# The regex families return sub-pipes and sub-classes next to their parents (H200,
# ncu 2025.3: `fma_type_fp16`, `xu_realtime`, `lsu_mem_lg_cmd_read`, `tensor_op_hmma`, ...).
# Pipes named without an underscore are the ones ncu's Compute Workload Analysis charts;
# `fmaheavy`/`fmalite` are the two halves of FMA (FMA cycles = their mean). The heavy half
# also runs IMAD, so a Philox `tl.rand` saturates it while ncu's own HighPipeUtilization
# rule, which ranks only top-level pipes, calls ALU the busiest and "not a bottleneck":
# the baseline's dropout kernel had fmaheavy 89.9% busy, math-pipe-throttle as its top
# stall, and ALU 55.6% (tests/profile/fixtures/ncu_baseline.csv).
FMA_HALVES = ("fmaheavy", "fmalite")
# Thread-instruction classes that partition all predicated-on instructions (their sum is
# the executed total, checked on the H200 fixtures); fadd/ffma/fmul, dadd/dfma/dmul and
# hadd/hfma/hmul are subsets of fp32, fp64 and fp16 and would count twice.
_MIX_SUBCLASSES = {"fadd", "ffma", "fmul", "dadd", "dfma", "dmul", "hadd", "hfma", "hmul"}
# Rule results about the profiler's own setup, not the kernel (e.g. "The optional metric
# smsp__pcsamp_sample_count could not be found").
_PROFILER_NOISE = re.compile(r"optional metric|could not be found|Warp Stall Sampling", re.I)

_LIMITS = {
    "registers": ("launch__occupancy_limit_registers", f"{OCC}/Block Limit Registers"),
    "shared memory": ("launch__occupancy_limit_shared_mem", f"{OCC}/Block Limit Shared Mem"),
    "warps": ("launch__occupancy_limit_warps", f"{OCC}/Block Limit Warps"),
    "blocks per SM": ("launch__occupancy_limit_blocks", f"{OCC}/Block Limit SM"),
    "barriers": ("launch__occupancy_limit_barriers", f"{OCC}/Block Limit Barriers"),
}


class KernelProfile(BaseModel):
    """About thirty counters for one kernel launch, plus ncu's ranked rule hints."""

    id: int
    name: str
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    grid_blocks: int | None = None
    block_threads: int | None = None
    duration_us: float | None = None
    # Speed of light: % of the unit's peak, the profiler's own bottleneck evidence.
    memory_sol_pct: float | None = None
    compute_sol_pct: float | None = None
    dram_throughput_pct: float | None = None
    l1_throughput_pct: float | None = None
    l2_throughput_pct: float | None = None
    # Memory traffic.
    dram_bytes_read: float | None = None
    dram_bytes_write: float | None = None
    dram_bytes_total: float | None = Field(
        default=None, description="read + write; else the section's DRAM bandwidth × duration"
    )
    dram_bandwidth_gbps: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    global_load_bytes_per_sector: float | None = Field(
        default=None, description="of 32 bytes fetched"
    )
    # Registers, spills, shared memory.
    registers_per_thread: float | None = None
    local_load_sectors: float | None = Field(default=None, description="register spill/stack reads")
    local_store_sectors: float | None = None
    smem_static_bytes: float | None = None
    smem_dynamic_bytes: float | None = None
    smem_bank_conflicts_load: float | None = None
    smem_bank_conflicts_store: float | None = None
    smem_wavefronts: float | None = Field(
        default=None, description="shared-memory wavefronts; conflicts add to these"
    )
    # Occupancy and scheduling.
    theoretical_occupancy_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    occupancy_limiter: str | None = None
    waves_per_sm: float | None = None
    sm_busy_pct: float | None = None
    issue_slots_busy_pct: float | None = None
    eligible_warps_per_scheduler: float | None = None
    active_warps_per_scheduler: float | None = None
    no_eligible_pct: float | None = None
    warp_cycles_per_issued_inst: float | None = None
    executed_instructions: float | None = None
    pipe_utilization_pct: dict[str, float] = Field(
        default_factory=dict,
        description="top-level pipes and the FMA halves: max(% inst executed, % cycles active)",
    )
    subpipe_utilization_pct: dict[str, float] = Field(
        default_factory=dict, description="e.g. tensor_op_hmma, xu_realtime"
    )
    stall_cycles_per_inst: dict[str, float] = Field(
        default_factory=dict, description="cycles a warp waits per issued instruction, by reason"
    )
    instruction_mix: dict[str, float] = Field(
        default_factory=dict,
        description="predicated-on thread instructions by class; the classes partition the total",
    )
    instruction_subclasses: dict[str, float] = Field(
        default_factory=dict, description="fadd/ffma/fmul/... (inside fp32 etc.)"
    )
    rules: list[RuleHint] = Field(
        default_factory=list, description="ranked: OPT first, biggest speedup first"
    )
    raw: list[RawMetric] = Field(default_factory=list, exclude=True)

    @property
    def dram_bytes(self) -> float | None:
        return self.dram_bytes_total

    def pipe(self, name: str) -> float | None:
        """Utilization of a pipe family (e.g. 'tensor' takes the busiest tensor sub-pipe)."""
        every = {**self.subpipe_utilization_pct, **self.pipe_utilization_pct}
        vals = [v for k, v in every.items() if k == name or k.startswith(name)]
        return max(vals) if vals else None

    def busiest_pipe(self) -> tuple[str, float] | None:
        """The busiest top-level pipe or FMA half (the heavy half is where IMAD-heavy code
        saturates)."""
        if not self.pipe_utilization_pct:
            return None
        return max(self.pipe_utilization_pct.items(), key=lambda kv: kv[1])

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        items = [
            (k, v)
            for k, v in self.stall_cycles_per_inst.items()
            if k not in _STALL_IGNORED and v > 0
        ]
        return sorted(items, key=lambda kv: -kv[1])[:n]


def _rank_rules(rules: list[RuleHint]) -> list[RuleHint]:
    order = {"OPT": 0, "WRN": 1, "ERR": 1, "INF": 2}
    kept = [r for r in rules if not _PROFILER_NOISE.search(r.description)]
    return sorted(kept, key=lambda r: (order.get(r.kind, 3), -(r.est_speedup_pct or 0.0)))


def pipe_label(name: str) -> str:
    """ncu's pipe names as a reader knows them: 'fmaheavy' → 'FMA-heavy', 'alu' → 'ALU'."""
    if name in FMA_HALVES:
        return "FMA-" + name[3:]
    return name.upper()


class _Families(BaseModel):
    stalls: dict[str, float] = Field(default_factory=dict)
    pipes: dict[str, float] = Field(default_factory=dict)
    subpipes: dict[str, float] = Field(default_factory=dict)
    mix: dict[str, float] = Field(default_factory=dict)
    mix_sub: dict[str, float] = Field(default_factory=dict)


def _families(k: RawKernel) -> _Families:
    f = _Families()
    for key, m in k.metrics.items():
        if m.value is None:
            continue
        if s := _STALL.match(key):
            f.stalls[s.group(1)] = m.value
        elif p := (_PIPE_INST.match(key) or _PIPE_CYC.match(key)):
            name = p.group(1)
            bucket = f.pipes if "_" not in name else f.subpipes
            bucket[name] = max(bucket.get(name, 0.0), m.value)
        elif o := _OP_MIX.match(key):
            (f.mix_sub if o.group(1) in _MIX_SUBCLASSES else f.mix)[o.group(1)] = m.value
    return f


def _limiter(k: RawKernel) -> str | None:
    limits = {name: k.value(*keys) for name, keys in _LIMITS.items()}
    known = {n: v for n, v in limits.items() if v is not None}
    if not known:
        return None
    low = min(known.values())
    return ", ".join(n for n, v in known.items() if v == low)


def _mul(a: float | None, b: float) -> float | None:
    return None if a is None else a * b


def kernel_profile(k: RawKernel) -> KernelProfile:
    """Typed metrics from one kernel's raw ncu values (all in base units)."""
    v = k.value
    duration_s = v("gpu__time_duration.sum", f"{SOL}/Duration", unit_like="second")
    read = v("dram__bytes_read.sum")
    write = v("dram__bytes_write.sum")
    total = None if read is None and write is None else (read or 0.0) + (write or 0.0)
    bw = _mul(
        v("dram__bytes.sum.per_second", f"{MEM}/Memory Throughput", unit_like="byte/second"), 1e-9
    )
    if duration_s and total is not None:
        bw = total / duration_s / 1e9
    elif duration_s and bw is not None:
        total = bw * 1e9 * duration_s
    bps = v("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
    fam = _families(k)
    block_threads = v("launch__block_size", f"{LAUNCH}/Block Size")
    grid_blocks = v("launch__grid_size", f"{LAUNCH}/Grid Size")
    return KernelProfile(
        id=k.id,
        name=k.name,
        grid=k.grid,
        block=k.block,
        grid_blocks=int(grid_blocks) if grid_blocks is not None else None,
        block_threads=int(block_threads) if block_threads is not None else None,
        duration_us=_mul(duration_s, 1e6),
        memory_sol_pct=v(
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            f"{SOL}/Memory Throughput",
            unit_like="%",
        ),
        compute_sol_pct=v(
            "sm__throughput.avg.pct_of_peak_sustained_elapsed", f"{SOL}/Compute (SM) Throughput"
        ),
        dram_throughput_pct=v(
            "dram__throughput.avg.pct_of_peak_sustained_elapsed", f"{SOL}/DRAM Throughput"
        ),
        l1_throughput_pct=v(
            "l1tex__throughput.avg.pct_of_peak_sustained_active", f"{SOL}/L1/TEX Cache Throughput"
        ),
        l2_throughput_pct=v(
            "lts__throughput.avg.pct_of_peak_sustained_elapsed", f"{SOL}/L2 Cache Throughput"
        ),
        dram_bytes_read=read,
        dram_bytes_write=write,
        dram_bytes_total=total,
        dram_bandwidth_gbps=bw,
        l1_hit_pct=v("l1tex__t_sector_hit_rate.pct", f"{MEM}/L1/TEX Hit Rate"),
        l2_hit_pct=v("lts__t_sector_hit_rate.pct", f"{MEM}/L2 Hit Rate"),
        global_load_bytes_per_sector=_mul(bps, 32 / 100),
        registers_per_thread=v("launch__registers_per_thread", f"{LAUNCH}/Registers Per Thread"),
        local_load_sectors=v("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"),
        local_store_sectors=v("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
        smem_static_bytes=v(
            "launch__shared_mem_per_block_static", f"{LAUNCH}/Static Shared Memory Per Block"
        ),
        smem_dynamic_bytes=v(
            "launch__shared_mem_per_block_dynamic", f"{LAUNCH}/Dynamic Shared Memory Per Block"
        ),
        smem_bank_conflicts_load=v("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
        smem_bank_conflicts_store=v("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        smem_wavefronts=v("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
        theoretical_occupancy_pct=v(
            "sm__maximum_warps_per_active_cycle_pct", f"{OCC}/Theoretical Occupancy"
        ),
        achieved_occupancy_pct=v(
            "sm__warps_active.avg.pct_of_peak_sustained_active", f"{OCC}/Achieved Occupancy"
        ),
        occupancy_limiter=_limiter(k),
        waves_per_sm=v("launch__waves_per_multiprocessor", f"{LAUNCH}/Waves Per SM"),
        sm_busy_pct=v(
            "sm__instruction_throughput.avg.pct_of_peak_sustained_active", f"{COMPUTE}/SM Busy"
        ),
        issue_slots_busy_pct=v(
            "smsp__issue_active.avg.pct_of_peak_sustained_active", f"{COMPUTE}/Issue Slots Busy"
        ),
        eligible_warps_per_scheduler=v(
            "smsp__warps_eligible.avg.per_cycle_active", f"{SCHED}/Eligible Warps Per Scheduler"
        ),
        active_warps_per_scheduler=v(
            "smsp__warps_active.avg.per_cycle_active", f"{SCHED}/Active Warps Per Scheduler"
        ),
        no_eligible_pct=v(f"{SCHED}/No Eligible"),
        warp_cycles_per_issued_inst=v(
            "smsp__average_warp_latency_per_inst_issued.ratio",
            f"{WARP}/Warp Cycles Per Issued Instruction",
        ),
        executed_instructions=v("smsp__inst_executed.sum", f"{INSTR}/Executed Instructions"),
        pipe_utilization_pct=fam.pipes,
        subpipe_utilization_pct=fam.subpipes,
        stall_cycles_per_inst=fam.stalls,
        instruction_mix=fam.mix,
        instruction_subclasses=fam.mix_sub,
        rules=_rank_rules(k.rules),
        raw=list({id(m): m for m in k.metrics.values()}.values()),
    )


def parse_ncu_csv(text: str) -> list[KernelProfile]:
    """Typed profiles of every kernel in an ncu CSV report (details or raw page)."""
    return [kernel_profile(k) for k in parse_raw_kernels(text)]
