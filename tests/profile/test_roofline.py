from __future__ import annotations

import pytest

from kernelloop.profile import H200, classify, roofline

# The flagship at 16384×8192 bf16: read x and residual, write out (shared/GPU.md).
MIN_BYTES = 3 * 16384 * 8192 * 2


def test_floor_matches_the_measured_torch_add_anchor():
    r = roofline(MIN_BYTES, 0, 0.83e-3, H200)
    assert r.floor_s == pytest.approx(0.189e-3, rel=0.01)  # GPU.md: 0.189 ms
    assert r.pct_of_floor == pytest.approx(100 * 0.1886 / 0.83, rel=0.01)
    assert r.model_bound == "memory"


def test_compute_floor_wins_when_flops_dominate():
    r = roofline(1e6, 1e12, 2e-3, H200, flop_kind="bf16_tensor")
    assert r.model_bound == "compute"
    assert r.compute_floor_s == pytest.approx(1e12 / 790e12)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        roofline(1, 0, 0.0)
    with pytest.raises(ValueError, match="fp8"):
        roofline(1, 1, 1.0, flop_kind="fp8")


def test_rand_kernel_with_low_dram_is_not_called_memory_bound(synthetic):
    fused = synthetic[0]
    model = roofline(MIN_BYTES, 0, fused.duration_us * 1e-6)
    c = classify(fused, model)
    assert c.bound == "compute-bound"
    assert c.busiest_pipe == "alu"
    assert "ALU" in c.evidence


def test_memory_heavy_kernel_is_memory_bound(synthetic):
    assert classify(synthetic[1]).bound == "memory-bound"


def test_both_units_low_is_latency_bound(synthetic):
    k = synthetic[0].model_copy(
        update={
            "compute_sol_pct": 30.0,
            "issue_slots_busy_pct": 25.0,
            "pipe_utilization_pct": {"alu": 28.0},
        }
    )
    assert classify(k).bound == "latency-bound"


def test_without_counters_the_byte_model_decides_only_when_near_the_floor():
    assert classify(None, roofline(MIN_BYTES, 0, 0.2e-3)).bound == "memory-bound"
    far = classify(None, roofline(MIN_BYTES, 0, 0.83e-3))
    assert far.bound == "unknown" and "no profiler counters" in far.evidence


def test_each_sol_number_names_the_unit_it_comes_from(synthetic):
    # "memory SOL 82%" beside "DRAM 71% of peak" read as a contradiction (issue 16): the
    # evidence says which memory unit is at the SOL figure.
    k = synthetic[1].model_copy(
        update={"memory_sol_pct": None, "dram_throughput_pct": 71.0, "l1_throughput_pct": 82.0,
                "l2_throughput_pct": 40.0}
    )  # fmt: skip
    ev = classify(k).evidence
    assert "memory SOL 82% (busiest memory unit, % of its peak throughput: L1/TEX)" in ev
    assert "compute SOL" in ev and "(% of peak: " in ev


def test_profile_uses_the_tasks_peak_table_for_a_compute_bound_task():
    from kernelloop.profile.roofline import from_task_ceiling
    from kernelloop.task import ceiling_for

    h200 = from_task_ceiling(ceiling_for("NVIDIA H200"))
    flops, bytes_ = 2 * 4096**3, (3 * 4096 * 4096 + 4096 * 4096) * 2
    r = roofline(bytes_, flops, 0.2e-3, h200, flop_kind="bfloat16")
    assert r.model_bound == "compute"
    assert r.floor_s == pytest.approx(flops / 989.5e12)
    assert r.pct_of_floor == pytest.approx(100 * flops / 989.5e12 / 0.2e-3)
    # No flops counted: no peak rate is needed for the dtype (the memory floor only).
    assert roofline(bytes_, 0, 0.2e-3, h200, flop_kind="int8").model_bound == "memory"
