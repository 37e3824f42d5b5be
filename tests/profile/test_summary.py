from __future__ import annotations

import json

import pytest

from kernelloop.profile import CompileFact, KernelTiming, ProfileReport, estimate_tokens, summarize
from kernelloop.profile.render import prompt_text

MIN_BYTES = 3 * 16384 * 8192 * 2


def test_one_kernel_summary_fits_the_budget_and_names_the_bottleneck(synthetic):
    report = summarize(
        synthetic[:1], min_bytes=MIN_BYTES, measured_time_s=0.83e-3, candidate="fused.py"
    )
    text = prompt_text(report)
    assert estimate_tokens(text) <= 1500
    assert "COMPUTE-BOUND" in text and "MEMORY-BOUND" not in text
    assert "23% of floor" in text
    for needle in (
        "DRAM 20% of peak",
        "L2 hit 86%",
        "40 registers/thread",
        "bank conflicts 12.3K load",
        "limited by registers",
        "math_pipe_throttle",
        "ALU 78%",
        "SOLBottleneck",
        "est. 22% global",
    ):
        assert needle in text, needle
    assert text.index("SOLBottleneck") < text.index("HighPipeUtilization")


def test_budget_drops_detail_before_failing(synthetic):
    report = summarize(synthetic[:1], min_bytes=MIN_BYTES)
    full = prompt_text(report)
    tight = prompt_text(report, max_tokens=estimate_tokens(full) - 60)
    assert estimate_tokens(tight) <= estimate_tokens(full) - 60
    assert "COMPUTE-BOUND" in tight and "SOLBottleneck" in tight
    assert "Instruction mix" not in tight or tight.count("- [") < full.count("- [")


def test_multi_kernel_summary_reports_each_kernel_and_the_extra_traffic(synthetic):
    report = summarize(synthetic, min_bytes=MIN_BYTES)
    text = prompt_text(report)
    assert "Kernel 1/2 `_fused_rand_kernel`" in text and "Kernel 2/2 `_layernorm_kernel`" in text
    assert report.traffic_ratio == pytest.approx(report.total_dram_bytes / MIN_BYTES)
    assert f"{report.traffic_ratio:.1f}× the minimal" in text
    assert [c.bound for c in report.classifications] == ["compute-bound", "memory-bound"]


def test_parent_deltas_flag_a_secondary_regression(synthetic):
    child = synthetic[0]
    parent = child.model_copy(
        update={"duration_us": 1133.0, "l2_hit_pct": 91.0, "smem_bank_conflicts_load": 400_000.0}
    )
    report = summarize([child], parent=[parent], min_bytes=MIN_BYTES)
    by_metric = {d.metric: d for d in report.deltas}
    assert not by_metric["duration_us"].regression
    assert not by_metric["smem_bank_conflicts_load"].regression
    assert [d.metric for d in report.regressions] == ["l2_hit_pct"]
    text = prompt_text(report)
    assert "REGRESSIONS" in text and "L2 hit 91.0% → 86.0% (-5.0 pts)" in text
    assert "duration 1.133 ms → 830.2 us (-27%)" in text


def test_noise_sized_changes_are_not_reported(synthetic):
    child = synthetic[0]
    parent = child.model_copy(update={"l2_hit_pct": 86.5, "duration_us": 835.0})
    assert summarize([child], parent=[parent]).deltas == []


def test_fused_vs_three_kernels_compares_totals(synthetic):
    fused = synthetic[0].model_copy(update={"name": "_fused"})
    base = [
        synthetic[1],
        synthetic[1].model_copy(update={"name": "_softmax"}),
        synthetic[1].model_copy(update={"name": "_dropout"}),
    ]
    d = {x.metric: x for x in summarize([fused], parent=base).deltas}
    assert d["kernel_count"].before == 3 and d["kernel_count"].after == 1
    assert not d["kernel_count"].regression


def test_fallback_summary_says_what_is_missing():
    facts = [
        CompileFact(
            name="_fused",
            arch="sm_90",
            n_regs=40,
            spill_store_bytes=0,
            spill_load_bytes=0,
            stack_bytes=0,
            shared_bytes=0,
            num_warps=4,
        )
    ]
    report = summarize(
        [],
        min_bytes=MIN_BYTES,
        compile_facts=facts,
        timings=[KernelTiming(name="_fused", launches=1, total_us=830.0)],
        missing=["Nsight Compute: not found on this machine (no GPU)"],
    )
    text = prompt_text(report)
    assert report.source == "fallback"
    assert "no hardware counters" in text and "Nsight Compute: not found" in text
    assert "40 registers/thread" in text and "`_fused` ×1 830.0 us" in text
    assert "warp stall reasons" in text and "profiler rule hints" in text
    assert "Bottleneck: unknown" in text and "MEMORY-BOUND" not in text


def test_record_json_round_trips(synthetic):
    report = summarize(synthetic, min_bytes=MIN_BYTES)
    data = report.to_record()
    again = ProfileReport.model_validate(json.loads(json.dumps(data)))
    assert again.kernels[0].rules[0].rule == "SOLBottleneck"
    assert "raw" not in data["kernels"][0]
    raw = report.to_record(include_raw=True)["kernels"][0]["raw"]
    assert any(m["name"] == "dram__bytes_read.sum" for m in raw)


def test_kernel_infos_fit_the_evaluation_record(synthetic):
    infos = summarize(synthetic[:1]).kernel_infos()
    assert (
        infos[0].name == "_fused_rand_kernel"
        and infos[0].n_regs == 40
        and infos[0].source == "profiler"
    )
    assert infos[0].shared_bytes == 1056 and infos[0].num_warps == 8
    facts = [
        CompileFact(
            name="_k", arch="sm_90", n_regs=32, spill_store_bytes=572, shared_bytes=0, num_warps=1
        )
    ]
    info = summarize([], compile_facts=facts).kernel_infos()[0]
    assert (info.n_regs, info.n_spills, info.source) == (32, 572, "triton-compile")
