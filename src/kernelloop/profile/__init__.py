"""Profiling: Nsight Compute driver and parser, typed metrics, roofline, the compact summary.

Typical use (the sandbox runs the command; nothing here imports candidate code except
`fallback.triton_compile_facts`, which belongs inside the sandbox too):

    argv = ncu_command(worker_argv, out_dir / "ncu.csv")        # run it in the sandbox
    kernels = parse_ncu_csv((out_dir / "ncu.csv").read_text())
    report = summarize(kernels, parent=parent_report, min_bytes=..., measured_time_s=...)
    text = prompt_text(report)                                  # profile.render
    record_json = report.to_record()
"""

from kernelloop.profile.deltas import MetricDelta
from kernelloop.profile.fallback import (
    CompileFact,
    KernelTiming,
    compile_facts_command,
    triton_compile_facts,
)
from kernelloop.profile.metrics import KernelProfile, parse_ncu_csv
from kernelloop.profile.ncu_csv import RuleHint
from kernelloop.profile.ncu_driver import (
    DEFAULT_METRICS,
    DEFAULT_SECTIONS,
    NVTX_RANGE,
    ProfilerUnavailable,
    diagnose_ncu_failure,
    find_ncu,
    ncu_command,
)
from kernelloop.profile.roofline import H200, Ceilings, Classification, Roofline, classify, roofline
from kernelloop.profile.summary import ProfileReport, estimate_tokens, summarize

__all__ = [
    "DEFAULT_METRICS",
    "DEFAULT_SECTIONS",
    "NVTX_RANGE",
    "H200",
    "Ceilings",
    "Classification",
    "CompileFact",
    "KernelProfile",
    "KernelTiming",
    "MetricDelta",
    "ProfileReport",
    "ProfilerUnavailable",
    "Roofline",
    "RuleHint",
    "classify",
    "compile_facts_command",
    "diagnose_ncu_failure",
    "estimate_tokens",
    "find_ncu",
    "ncu_command",
    "parse_ncu_csv",
    "roofline",
    "summarize",
    "triton_compile_facts",
]
