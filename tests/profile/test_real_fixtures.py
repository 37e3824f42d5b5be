"""Tests on Nsight Compute reports captured on the H200 (flagship at 16384×8192 bf16).

They skip until tests/profile/fixtures/ncu_baseline.csv and ncu_fused.csv are committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.profile import estimate_tokens, parse_ncu_csv, summarize

FIXTURES = Path(__file__).parent / "fixtures"

MIN_BYTES = 3 * 16384 * 8192 * 2  # read x, read residual, write out (bf16)
BASELINE_KERNELS = {"_layernorm_kernel", "_softmax_kernel", "_dropout_residual_kernel"}


def _load(name: str):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"{name} not captured yet (H200 report goes in tests/profile/fixtures/)")
    kernels = parse_ncu_csv(path.read_text())
    assert kernels, f"{name} has no kernel rows"
    return kernels


def test_fused_candidate_is_not_called_memory_bound():
    kernels = _load("ncu_fused.csv")
    assert len(kernels) == 1
    k = kernels[0]
    assert k.duration_us and k.duration_us > 0
    report = summarize(kernels, min_bytes=MIN_BYTES, candidate="fused_naive.py")
    assert report.classifications[0].bound != "memory-bound", report.classifications[0].evidence
    text = report.format_for_prompt()
    assert estimate_tokens(text) <= 1500, estimate_tokens(text)
    assert "MEMORY-BOUND" not in text
    for needle in (k.name, "DRAM", "of floor", "registers/thread", "Occupancy"):
        assert needle in text, needle


def test_fused_candidate_has_the_curated_metrics():
    k = _load("ncu_fused.csv")[0]
    filled = {f: getattr(k, f) for f in ("dram_throughput_pct", "memory_sol_pct", "compute_sol_pct", "l2_hit_pct",
                                         "registers_per_thread", "achieved_occupancy_pct",
                                         "theoretical_occupancy_pct", "waves_per_sm", "dram_bytes_total")}
    assert all(v is not None for v in filled.values()), filled
    assert k.rules, "the details page should carry rule results"


def test_baseline_reports_each_kernel_and_the_extra_traffic():
    kernels = _load("ncu_baseline.csv")
    assert {k.name for k in kernels} >= BASELINE_KERNELS
    report = summarize(kernels, min_bytes=MIN_BYTES, candidate="baseline.py")
    # fp32 intermediates y and s are written once and read again: well over 2× the minimal bytes.
    assert report.traffic_ratio is not None and report.traffic_ratio > 2.0, report.traffic_ratio
    text = report.format_for_prompt()
    assert estimate_tokens(text) <= 1500 * len(kernels)
    for name in BASELINE_KERNELS:
        assert f"`{name}`" in text
    assert "× the minimal" in text


def test_fused_vs_baseline_deltas_use_totals():
    base, fused = _load("ncu_baseline.csv"), _load("ncu_fused.csv")
    report = summarize(fused, parent=base, min_bytes=MIN_BYTES)
    d = {x.metric: x for x in report.deltas}
    assert d["kernel_count"].before >= 3 and d["kernel_count"].after == 1
    assert d["dram_bytes_total"].after < d["dram_bytes_total"].before
