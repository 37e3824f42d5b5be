from __future__ import annotations

import pytest

from kernelloop.profile import parse_ncu_csv
from kernelloop.profile.ncu_csv import parse_number, parse_raw_kernels, to_base_unit


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,234.5", 1234.5),
        ("2,619,000,000", 2.619e9),
        ("n/a", None),
        ("", None),
        ("(256, 1, 1)", None),
        ("  42 ", 42.0),
        ("-3.5", -3.5),
    ],
)
def test_numbers_keep_thousands_separators_out(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (830.21, "usecond", (830.21e-6, "second")),
        (120512, "nsecond", (120512e-9, "second")),
        (3.78, "Tbyte/second", (3.78e12, "byte/second")),
        (2.0, "cycle/nsecond", (2e9, "cycle/second")),
        (64, "Kbyte", (64e3, "byte")),
        (1056, "byte/block", (1056, "byte/block")),
        (75, "%", (75, "%")),
        (40, "register/thread", (40, "register/thread")),
    ],
)
def test_auto_scaled_units_return_to_base(value, unit, expected):
    v, u = to_base_unit(value, unit)
    assert u == expected[1]
    assert v == pytest.approx(expected[0])


def test_banner_lines_and_kernels_in_id_order(synthetic_text):
    kernels = parse_raw_kernels(synthetic_text)
    assert [k.id for k in kernels] == [0, 1]
    assert kernels[0].name == "_fused_rand_kernel"
    assert kernels[0].block == (256, 1, 1)
    assert kernels[1].grid == (4096, 1, 1)  # "(4,096, 1, 1)": separator inside a dimension


def test_typed_metrics_of_the_fused_kernel(synthetic):
    k = synthetic[0]
    assert k.duration_us == pytest.approx(830.21)
    assert k.dram_bytes_read == 536_936_448
    assert k.dram_bytes_total == pytest.approx(536_936_448 + 268_468_224)
    assert k.dram_bandwidth_gbps == pytest.approx(k.dram_bytes_total / 830.21e-6 / 1e9)
    assert (k.dram_throughput_pct, k.memory_sol_pct, k.compute_sol_pct) == (20.12, 22.41, 78.35)
    assert (k.l1_hit_pct, k.l2_hit_pct) == (0.52, 86.0)
    assert k.grid_blocks == 16384 and k.block_threads == 256
    assert k.registers_per_thread == 40
    assert (k.local_load_sectors, k.local_store_sectors) == (0, 0)
    assert (k.smem_bank_conflicts_load, k.smem_bank_conflicts_store) == (12288, 0)
    assert k.smem_dynamic_bytes == 1056
    assert k.global_load_bytes_per_sector == pytest.approx(32.0)
    assert (k.theoretical_occupancy_pct, k.achieved_occupancy_pct) == (75.0, 68.9)
    assert k.occupancy_limiter == "registers"  # Block Limit Registers 6 < Warps 8 < Shared 21
    assert k.waves_per_sm == 15.52
    assert k.busiest_pipe() == ("alu", 78.3)
    assert k.pipe("tensor") == 0.0
    assert k.top_stalls(2) == [("math_pipe_throttle", 4.81), ("wait", 2.10)]
    assert "selected" not in dict(k.top_stalls(10))
    assert k.instruction_mix["integer"] == 4e10
    assert k.executed_instructions == 1_876_543_210


def test_rules_ranked_opt_first_by_speedup_and_multiline_text_joined(synthetic):
    rules = synthetic[0].rules
    assert [r.rule for r in rules[:3]] == [
        "SOLBottleneck",
        "HighPipeUtilization",
        "AchievedOccupancy",
    ]
    assert rules[0].est_speedup_pct == 21.65 and rules[0].speedup_type == "global"
    assert rules[3].kind == "WRN" and rules[3].est_speedup_pct is None  # "n/a"
    assert rules[-1].kind == "INF"
    assert "\n" not in rules[1].description and "should not be a bottleneck" in rules[1].description


def test_label_only_kernel_falls_back_to_section_labels(synthetic):
    k = synthetic[1]
    assert k.duration_us == pytest.approx(120.512)  # "120,512" nsecond
    assert k.dram_bandwidth_gbps == pytest.approx(3780)  # Tbyte/second
    assert k.dram_bytes_read is None
    assert k.dram_bytes_total == pytest.approx(3.78e12 * 120.512e-6)
    assert k.rules[0].rule == "MemoryCacheAccessPattern"


def test_label_name_form_and_raw_page():
    details = (
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
        '"0","k","GPU Speed Of Light Throughput",'
        '"Duration (gpu__time_duration.sum)","nsecond","1,500"\n'
    )
    assert parse_ncu_csv(details)[0].duration_us == pytest.approx(1.5)
    raw = (
        "noise printed by the application\n"
        '"ID","Kernel Name","gpu__time_duration.sum","lts__t_sector_hit_rate.pct",'
        '"dram__bytes_read.sum"\n'
        '"","","usecond","%","Mbyte"\n'
        '"0","a","2.5","81.0","1,024"\n'
        '"1","b","n/a","50","2"\n'
    )
    a, b = parse_ncu_csv(raw)
    assert (
        a.duration_us == pytest.approx(2.5)
        and a.l2_hit_pct == 81.0
        and a.dram_bytes_read == 1.024e9
    )
    assert b.duration_us is None and b.dram_bytes_read == 2e6


def test_no_table_gives_no_kernels():
    assert parse_ncu_csv("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM\n") == []
