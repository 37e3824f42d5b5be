"""The roofline floor (task/roofline.py) on real task folders: memory- vs compute-bound
per shape, the peak table's GPUs, and the task's and the machine's overrides."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelloop.errors import TaskError
from kernelloop.task import ceiling_for, floor_on, load_task
from kernelloop.task.roofline import PEAKS_ENV
from tests.conftest import FLAGSHIP, ROOT

MATMUL = ROOT / "examples" / "matmul_bias_gelu"
H200 = "NVIDIA H200"


def task_copy(tmp_path: Path, src: Path = MATMUL, extra: str = "", drop_flops: bool = False):
    """A copy of an example with `extra` TOML appended (its [roofline] table is last)."""
    dst = tmp_path / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", ".kernelloop"))
    toml = (dst / "task.toml").read_text()
    if drop_flops:
        toml = "\n".join(x for x in toml.splitlines() if not x.startswith("flops ="))
    (dst / "task.toml").write_text(toml + "\n" + extra)
    return load_task(dst)


def shape(task, label):
    return task.find_shape(label)


def test_large_matmul_is_compute_bound_and_skinny_one_memory_bound():
    t = load_task(MATMUL)
    big = floor_on(t, shape(t, "4096x4096x4096"), "bfloat16", H200)
    assert big.bound == "compute"
    assert big.compute_ms == pytest.approx(2 * 4096**3 / 989.5e12 * 1e3)
    assert big.ms == big.compute_ms > big.memory_ms
    skinny = floor_on(t, shape(t, "16x8192x8192"), "bfloat16", H200)
    assert skinny.bound == "memory"
    bytes_ = (16 * 8192 + 8192 * 8192 + 8192 + 2 * 16 * 8192) * 2
    assert skinny.ms == skinny.memory_ms == pytest.approx(bytes_ / 4.27e12 * 1e3)
    assert skinny.compute_ms < skinny.memory_ms


def test_task_without_flops_keeps_the_memory_floor():
    t = load_task(FLAGSHIP)
    f = floor_on(t, shape(t, "16384x8192"), "bfloat16", H200)
    assert (f.bound, f.compute_ms) == ("memory", None)
    assert f.ms == pytest.approx(3 * 16384 * 8192 * 2 / 4.27e12 * 1e3)  # 0.1886 ms, as before


@pytest.mark.parametrize(
    ("name", "entry", "bf16_tflops"),
    [
        ("NVIDIA H200", "NVIDIA H200 SXM", 989.5),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 989.5),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB", 312.0),
        ("NVIDIA L40S", "NVIDIA L40S", 362.05),
        ("NVIDIA B200", "NVIDIA B200", 2250.0),
        # Parts the table does not describe must not borrow a sibling's rates.
        ("NVIDIA H100 PCIe", None, None),
        ("NVIDIA H200 NVL", None, None),
        ("NVIDIA A100-SXM4-40GB", None, None),
        ("NVIDIA GB200", None, None),
        ("AMD EPYC 7B13", None, None),
    ],
)
def test_peak_table_matches_the_names_gpus_report(name, entry, bf16_tflops):
    c = ceiling_for(name)
    if entry is None:
        assert c is None
        return
    assert c.table_name == entry
    assert c.flops_per_s["bfloat16"] == pytest.approx(bf16_tflops * 1e12)
    assert "datasheet" in c.flops_source
    assert c.dram_source == ("datasheet" if entry != "NVIDIA H200 SXM" else c.dram_source)
    if entry == "NVIDIA H200 SXM":
        assert c.dram_source.startswith("measured: torch.add")
        assert c.dram_bytes_per_s == pytest.approx(4.27e12)


def test_missing_peak_for_the_dtype_gives_the_memory_floor_and_says_why(tmp_path):
    t = task_copy(tmp_path, extra='flops_dtype = "float64"\n')
    f = floor_on(t, shape(t, "4096x4096x4096"), "bfloat16", "NVIDIA L40S")
    assert (f.bound, f.compute_ms) == ("memory", None)
    assert "no float64 peak rate for NVIDIA L40S" in f.note
    fp8 = task_copy(tmp_path / "b", extra='flops_dtype = "float8"\n')
    g = floor_on(fp8, shape(fp8, "4096x4096x4096"), "bfloat16", H200)
    assert g.compute_ms == pytest.approx(2 * 4096**3 / 1979e12 * 1e3)


def test_task_overrides_replace_the_table_and_add_gpus(tmp_path):
    t = task_copy(
        tmp_path,
        extra=(
            "[roofline.peaks.H200]\ndram_tb_s = 2.0\ntflops = { bfloat16 = 500 }\n"
            '[roofline.peaks."RTX 4090"]\ndram_tb_s = 1.0\ntflops = { float16 = 165 }\n'
        ),
    )
    big = floor_on(t, shape(t, "4096x4096x4096"), "bfloat16", H200)
    assert big.compute_ms == pytest.approx(2 * 4096**3 / 500e12 * 1e3)
    fp16 = floor_on(t, shape(t, "4096x4096x4096"), "float16", H200)
    assert fp16.compute_ms == pytest.approx(2 * 4096**3 / 989.5e12 * 1e3)  # not overridden
    skinny = floor_on(t, shape(t, "16x8192x8192"), "bfloat16", H200)
    bytes_ = t.min_bytes(shape(t, "16x8192x8192"), "bfloat16")
    assert skinny.memory_ms == pytest.approx(bytes_ / 2e12 * 1e3)
    rtx = floor_on(t, shape(t, "4096x4096x4096"), "float16", "NVIDIA GeForce RTX 4090")
    assert rtx.compute_ms == pytest.approx(2 * 4096**3 / 165e12 * 1e3)
    c = ceiling_for(H200, t.spec.roofline.peaks)
    assert c.dram_source == "DRAM rate from the task's [roofline.peaks] ('H200')"
    assert c.flops_source.endswith("; bfloat16 from the task's [roofline.peaks] ('H200')")
    assert floor_on(t, shape(t, "4096x4096x4096"), "bfloat16", "NVIDIA L40S").compute_ms == (
        pytest.approx(2 * 4096**3 / 362.05e12 * 1e3)
    )


def test_machine_overrides_apply_under_the_tasks(tmp_path, monkeypatch):
    peaks = tmp_path / "peaks.toml"
    peaks.write_text("[peaks.H200]\ndram_tb_s = 3.0\ntflops = { bfloat16 = 800, float16 = 700 }\n")
    monkeypatch.setenv(PEAKS_ENV, str(peaks))
    t = task_copy(tmp_path, extra="[roofline.peaks.H200]\ntflops = { bfloat16 = 600 }\n")
    big = shape(t, "4096x4096x4096")
    assert floor_on(t, big, "bfloat16", H200).compute_ms == pytest.approx(
        2 * 4096**3 / 600e12 * 1e3
    )  # the task's wins
    assert floor_on(t, big, "float16", H200).compute_ms == pytest.approx(
        2 * 4096**3 / 700e12 * 1e3
    )  # the machine's, where the task says nothing
    assert ceiling_for(H200).dram_bytes_per_s == pytest.approx(3.0e12)
    peaks.write_text("[peaks.H200]\ntflops = { bf16 = 800 }\n")
    with pytest.raises(TaskError, match=r"KERNELLOOP_PEAKS=.*unknown dtype.*bf16"):
        ceiling_for(H200)
    peaks.write_text("[gpu]\nname = 1\n")
    with pytest.raises(TaskError, match=r"unknown top-level key\(s\) \['gpu'\]"):
        ceiling_for(H200)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[roofline.peaks.H200]\ntflops = { fp8 = 1 }\n", "unknown dtype(s) ['fp8']"),
        ("[roofline.peaks.H200]\ndram_tb_s = 0\n", "greater than 0"),
        ('[roofline.peaks.""]\ndram_tb_s = 1\n', "name the GPU"),
        ('flops_dtype = "int8"\n', "unknown dtype 'int8'"),
    ],
)
def test_bad_overrides_are_refused_with_the_field(tmp_path, extra, message):
    with pytest.raises(TaskError, match="roofline") as e:
        task_copy(tmp_path, extra=extra)
    assert message in str(e.value)


def test_contract_quotes_the_best_against_the_roof_its_record_names():
    from kernelloop.objective import floors
    from kernelloop.task.contract import Judging, render_contract

    t = load_task(MATMUL)
    fl = floors(t, ["bfloat16"], "cuda", H200)
    row = {"shape": "4096x4096x4096", "dtype": "bfloat16", "median_ms": 0.2, "bound": "compute"}
    row["pct_of_floor"] = 100 * fl.by_shape[("4096x4096x4096", "bfloat16")].ms / 0.2
    j = Judging(
        device="cuda", device_name=H200, timings_count=True, dtypes=("bfloat16",),
        floor_device=fl.device, ceiling=fl.ceiling, floors=fl.by_shape,
        best_label="#3", best_rows=(row,),
    )  # fmt: skip
    shapes = render_contract(t, j).sections["shapes"]
    assert f"best #3: 0.2000 ms bf16 = {row['pct_of_floor']:.1f}% of the compute floor" in shapes
    assert row["pct_of_floor"] == pytest.approx(100 * 2 * 4096**3 / 989.5e12 / 0.2e-3)
    assert "Floor times on the NVIDIA H200 (see Roofline)" in shapes
    # A GPU the table lacks: floors on the reference GPU, and the reason.
    other = floors(t, ["bfloat16"], "cuda", "NVIDIA H100 PCIe")
    assert other.device == "NVIDIA H200, no ceilings are known for this GPU"
    assert other.by_shape[("4096x4096x4096", "bfloat16")].bound == "compute"
