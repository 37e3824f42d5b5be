"""Tests on Nsight Compute reports captured on the H200 (flagship at 16384×8192 bf16).

ncu_baseline.csv: the three-kernel baseline; ncu_fused.csv: the naive fused kernel with a
per-element `tl.rand` (Nsight Compute 2025.3.1, `ncu_command(...)`'s flags and metrics).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.profile import estimate_tokens, parse_ncu_csv, summarize
from kernelloop.profile.render import prompt_text

FIXTURES = Path(__file__).parent / "fixtures"

MIN_BYTES = 3 * 16384 * 8192 * 2  # read x, read residual, write out (bf16)
BASELINE_KERNELS = ["_layernorm_kernel", "_softmax_kernel", "_dropout_residual_kernel"]


@pytest.fixture(scope="module")
def fused():
    return parse_ncu_csv((FIXTURES / "ncu_fused.csv").read_text())


@pytest.fixture(scope="module")
def baseline():
    return parse_ncu_csv((FIXTURES / "ncu_baseline.csv").read_text())


def test_fused_candidate_is_not_called_memory_bound(fused):
    assert len(fused) == 1
    k = fused[0]
    assert k.duration_us == pytest.approx(906.624)
    report = summarize(fused, min_bytes=MIN_BYTES, candidate="fused_naive.py")
    c = report.classifications[0]
    # shared/GPU.md: DRAM ~20% of peak, the per-element Philox keeps the integer pipes busy.
    assert c.bound == "latency-bound", c.evidence
    assert k.dram_throughput_pct == pytest.approx(18.19)
    assert "12% occupancy, limited by registers" in c.evidence
    text = prompt_text(report)
    print(text)
    assert estimate_tokens(text) <= 1500, estimate_tokens(text)
    assert "MEMORY-BOUND" not in text and "LATENCY-BOUND" in text
    for needle in (
        "`_fused_kernel`",
        "DRAM 18% of peak",
        "21% of floor",
        "196 registers/thread",
        "theoretical 12% (limited by registers)",
        "0.99× the minimal 805 MB: traffic is already minimal",
        "ALU 36%",
        "heavy 49%",
        "integer 68%",
        "TheoreticalOccupancy",
    ):
        assert needle in text, needle


def test_fused_candidate_has_the_curated_metrics(fused):
    k = fused[0]
    filled = {
        f: getattr(k, f)
        for f in (
            "dram_throughput_pct",
            "memory_sol_pct",
            "compute_sol_pct",
            "l1_hit_pct",
            "l2_hit_pct",
            "global_load_bytes_per_sector",
            "registers_per_thread",
            "local_load_sectors",
            "smem_bank_conflicts_store",
            "achieved_occupancy_pct",
            "theoretical_occupancy_pct",
            "occupancy_limiter",
            "waves_per_sm",
            "sm_busy_pct",
            "issue_slots_busy_pct",
            "eligible_warps_per_scheduler",
            "warp_cycles_per_issued_inst",
            "dram_bytes_read",
            "dram_bytes_write",
            "smem_wavefronts",
        )
    }
    assert all(v is not None for v in filled.values()), filled
    assert (k.dram_bytes_read, k.dram_bytes_write) == (536_957_184, 256_457_984)
    assert k.block == (256, 1, 1) and k.grid == (16384, 1, 1) and k.occupancy_limiter == "registers"
    assert k.rules, "the details page should carry rule results"


def test_pipes_are_top_level_with_the_fma_halves(fused, baseline):
    k = fused[0]
    assert set(k.pipe_utilization_pct) >= {
        "alu",
        "fma",
        "fmaheavy",
        "fmalite",
        "lsu",
        "xu",
        "tensor",
    }
    assert not any("_" in name for name in k.pipe_utilization_pct)
    assert "xu_realtime" in k.subpipe_utilization_pct and k.pipe("tensor") == pytest.approx(0.03)
    assert k.pipe_utilization_pct["alu"] == pytest.approx(35.70)
    assert k.busiest_pipe() == ("fmaheavy", pytest.approx(49.33))
    # The baseline's dropout kernel is bound by the heavy FMA half (Philox IMADs), which
    # ncu's HighPipeUtilization rule does not rank: it calls ALU (55%) the busiest.
    dropout = baseline[2]
    assert dropout.busiest_pipe() == ("fmaheavy", pytest.approx(89.89))
    assert dropout.top_stalls(1)[0][0] == "math_pipe_throttle"


def test_stalls_skip_bookkeeping_and_sum_to_the_cycles_per_instruction(fused):
    k = fused[0]
    names = [n for n, _ in k.top_stalls(20)]
    assert names[:3] == ["wait", "long_scoreboard", "math_pipe_throttle"]
    assert "selected" not in names and "not_selected" not in names
    assert sum(k.stall_cycles_per_inst.values()) == pytest.approx(
        k.warp_cycles_per_issued_inst, abs=0.05
    )


def test_instruction_mix_is_a_partition(fused):
    k = fused[0]
    assert "fadd" not in k.instruction_mix and k.instruction_subclasses["fadd"] == 633_339_904
    # The classes add up to every predicated-on thread instruction: 400,556,032 warp
    # instructions × 29.72 active, not-predicated-off threads per warp.
    assert sum(k.instruction_mix.values()) == pytest.approx(400_556_032 * 29.72, rel=1e-3)
    assert max(k.instruction_mix, key=k.instruction_mix.get) == "integer"


def test_profiler_setup_notes_are_not_hints(baseline, fused):
    for k in [*baseline, *fused]:
        assert not any("optional metric" in r.description for r in k.rules), k.name
    assert [r.rule for r in fused[0].rules][:2] == ["IssueSlotUtilization", "TheoreticalOccupancy"]


def test_baseline_reports_each_kernel_and_the_extra_traffic(baseline):
    assert [k.name for k in baseline] == BASELINE_KERNELS
    report = summarize(baseline, min_bytes=MIN_BYTES, candidate="baseline.py")
    assert [c.bound for c in report.classifications] == [
        "memory-bound",
        "memory-bound",
        "compute-bound",
    ]
    # fp32 intermediates y and s are written once and read three times by the two-pass
    # kernels: 4.34 GB against the op's minimal 805 MB.
    assert report.total_dram_bytes == pytest.approx(4.34e9, rel=0.01)
    assert report.traffic_ratio == pytest.approx(5.4, abs=0.05)
    text = prompt_text(report)
    print(text)
    assert estimate_tokens(text) <= 1500 * len(baseline)
    for name in BASELINE_KERNELS:
        assert f"`{name}`" in text
    assert "together they moved 4.34 GB DRAM bytes = 5.4× the minimal 805 MB (3.53 GB extra" in text
    assert (
        "1.07 GB moved (read 805 MB, write 260 MB)" in text
    )  # dropout: s (fp32) + residual in, out
    # LayerNorm runs at 100% theoretical occupancy: its tied block limits are no "limiter".
    ln_block = text.split("Kernel 2/3")[0]
    assert (
        "theoretical 100%;" in ln_block
        and "limited by" not in ln_block.split("Occupancy:")[1].split("\n")[0]
    )
    assert "(0.4% of 10.3M shared wavefronts)" in ln_block


def test_fused_vs_baseline_deltas_use_totals_and_flag_the_occupancy_cost(baseline, fused):
    parent = summarize(baseline, min_bytes=MIN_BYTES)
    report = summarize(fused, parent=parent, min_bytes=MIN_BYTES)
    d = {x.metric: x for x in report.deltas}
    assert d["kernel_count"].before == 3 and d["kernel_count"].after == 1
    assert d["duration_us"].after < d["duration_us"].before and not d["duration_us"].regression
    assert d["dram_bytes_total"].after < d["dram_bytes_total"].before / 5
    assert (d["registers_per_thread"].before, d["registers_per_thread"].after) == (34, 196)
    assert {r.metric for r in report.regressions} == {
        "registers_per_thread",
        "achieved_occupancy_pct",
    }
    text = prompt_text(report)
    assert "total kernel time 1.207 ms → 906.6 us (-25%)" in text
    assert "REGRESSIONS in secondary metrics" in text and "34 → 196" in text
    assert text.count("34 → 196") == 1


def test_agent_metrics_use_the_tuner_rule_names(fused, baseline):
    m = summarize(fused, min_bytes=MIN_BYTES).agent_metrics()
    assert m["occupancy_limiter"] == "registers" and m["registers_per_thread"] == 196
    assert m["alu_pipe_pct"] == pytest.approx(35.70) and m["top_stall"] == "wait"
    assert m["bound"] == "latency-bound" and m["kernels_per_call"] == 1
    # Several kernels: the longest one speaks (softmax, 485 us).
    assert summarize(baseline).agent_metrics()["registers_per_thread"] == 34
