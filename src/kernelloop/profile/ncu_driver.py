"""Build the Nsight Compute command that profiles one candidate call, and read its failures.

The worker (evaluate/worker/main.py, profile mode) warms the candidate up and then runs ONE
call inside the NVTX push/pop range `kernelloop_profile`; ncu profiles only the kernels
launched inside that range, so compilation, warm-up and the reference are never counted.
Push/pop ranges are matched with a trailing slash (`--nvtx-include "NAME/"`); a name
without it would only match start/end ranges and profile nothing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from kernelloop.errors import KernelloopError

NVTX_RANGE = "kernelloop_profile"

# The sections the issue asks for. MemoryWorkloadAnalysis_Tables carries the shared-memory
# bank-conflict and sector tables; the rest are ncu's standard section identifiers.
DEFAULT_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables",
    "ComputeWorkloadAnalysis",
    "WarpStateStats",
    "SchedulerStats",
    "InstructionStats",
)

# Metrics requested by exact name on top of the sections. They land in the details page
# under "Command line profiler metrics" with their internal names, so the parser does not
# depend on display labels that change between ncu versions. Families whose members
# differ per architecture (stall reasons, pipes, instruction classes) use `regex:`, which
# selects what exists on the device instead of failing on a name it does not have.
DEFAULT_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__waves_per_multiprocessor",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    r"regex:^smsp__average_warps_issue_stalled_[a-z0-9_]+_per_issue_active\.ratio$",
    r"regex:^sm__inst_executed_pipe_[a-z0-9_]+\.avg\.pct_of_peak_sustained_active$",
    r"regex:^sm__pipe_[a-z0-9_]+_cycles_active\.avg\.pct_of_peak_sustained_active$",
    r"regex:^smsp__sass_thread_inst_executed_op_[a-z0-9_]+_pred_on\.sum$",
)

_NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")


class ProfilerUnavailable(KernelloopError):
    """Hardware counters cannot be read here; the summary falls back to compile facts."""


def find_ncu() -> Path | None:
    """The ncu binary: $KERNELLOOP_NCU, then PATH, then the usual CUDA install places."""
    env = os.environ.get("KERNELLOOP_NCU")
    if env:
        p = Path(env)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    on_path = shutil.which("ncu")
    if on_path:
        return Path(on_path)
    for c in _NCU_CANDIDATES:
        p = Path(c)
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def ncu_command(
    worker_argv: Sequence[str],
    report_csv: str | Path,
    *,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    metrics: Sequence[str] = DEFAULT_METRICS,
    nvtx_range: str = NVTX_RANGE,
    ncu: str | Path | None = None,
) -> list[str]:
    """argv that runs the worker under ncu and writes the details page as CSV to `report_csv`.

    `--clock-control none` keeps the GPU at its normal boost behaviour, so profiled
    durations match what the benchmark measures (ncu locks base clocks by default).
    `--print-units base` prints bytes in bytes and times in nanoseconds: no auto-scaled
    "Mbyte"/"usecond" values to convert back. `--print-details all` adds the section
    bodies (tables, charts) and the rule results with their estimated speedups.
    """
    if not worker_argv:
        raise ValueError("worker_argv is empty")
    exe = str(ncu) if ncu is not None else str(find_ncu() or "ncu")
    argv = [
        exe,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{nvtx_range}/",
    ]
    for s in sections:
        argv += ["--section", s]
    if metrics:
        argv += ["--metrics", ",".join(metrics)]
    argv += [
        "--csv",
        "--page",
        "details",
        "--print-details",
        "all",
        "--print-units",
        "base",
        "--log-file",
        str(report_csv),
    ]
    return argv + [str(a) for a in worker_argv]


# What ncu prints when it cannot profile, mapped to one sentence with the fix.
_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"ERR_NVGPUCTRPERM"),
        "the driver does not allow access to GPU performance counters; run as root or set "
        "the nvidia module option NVreg_RestrictProfilingToAdminUsers=0",
    ),
    (
        re.compile(r"No kernels were profiled"),
        "ncu saw no kernel inside the NVTX range 'kernelloop_profile/'; check that the worker "
        "ran in profile mode and that the candidate launches a kernel on the GPU",
    ),
    (
        re.compile(r"Failed to find metric|Failed to find section|metric .* not found", re.I),
        "ncu does not know one of the requested metrics or sections on this device; "
        "pass a shorter list through ncu_command(metrics=..., sections=...)",
    ),
    (
        re.compile(r"ERR_NVGPU|Profiling is not supported on this device|unsupported GPU", re.I),
        "this GPU or driver does not support Nsight Compute profiling",
    ),
)


def diagnose_ncu_failure(output: str) -> ProfilerUnavailable | None:
    """A ProfilerUnavailable for known ncu failure text in its output, else None."""
    for pattern, message in _FAILURES:
        if pattern.search(output):
            return ProfilerUnavailable(f"Nsight Compute could not profile: {message}.")
    return None
