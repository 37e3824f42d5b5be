"""Imported KernelBench problems get true floors: every tensor at its real element size,
the flops of their matmuls and convolutions, and a float32 compute rate that follows the
task's precision contract (issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.task import load_task
from kernelloop.task.contract import render_contract
from kernelloop.task.kernelbench import import_problem
from kernelloop.task.roofline import floor_on

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = FIXTURES / "kernelbench"  # copies of shared/kernelbench (MIT)
ROOF = (
    FIXTURES / "kernelbench_roofline"
)  # two more, kept apart: the import test takes all of SHARED
H200 = "NVIDIA H200"

MASKED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    \"\"\"Cumulative sum of the elements a boolean mask keeps.\"\"\"
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)

batch_size = 128
input_shape = (4000,)
dim = 1

def get_inputs():
    x = torch.randn(batch_size, *input_shape)
    return [x, torch.randint(0, 2, (batch_size, *input_shape)).bool()]

def get_init_inputs():
    return [dim]
"""


def _roof(folder: Path) -> tuple[str, str]:
    task = load_task(folder)
    return task.spec.roofline.bytes, task.spec.roofline.flops


def test_a_boolean_mask_counts_one_byte_an_element_and_the_floor_says_so(tmp_path):
    problem = tmp_path / "93_masked_cumsum.py"
    problem.write_text(MASKED)
    folder = import_problem(problem, tmp_path / "out", ["float32"])
    n = 128 * 4000
    assert _roof(folder) == (f"elem_size * {2 * n} + {n}", "0")  # x and out float, mask 1 B
    task = load_task(folder)
    floor = floor_on(task, task.spec.shapes[0], "float32", H200)
    assert floor is not None and floor.bound == "memory"
    # 4 B x + 1 B mask + 4 B out per element at the H200's measured 4.27 TB/s
    assert floor.ms == pytest.approx(9 * n / 4.27e12 * 1e3, rel=1e-9)


def test_integer_targets_and_an_integer_output_keep_their_own_size(tmp_path):
    folder = import_problem(SHARED / "level1" / "95_CrossEntropyLoss.py", tmp_path, ["float32"])
    bytes_expr, flops = _roof(folder)
    # predictions (batch x classes) float, targets int64 (8 B each), the loss a float scalar
    assert bytes_expr.endswith(" + 262144") and flops == "0", bytes_expr
    folder = import_problem(
        SHARED / "level1" / "51_Argmax_over_a_dimension.py", tmp_path, ["float32"]
    )
    bytes_expr, _ = _roof(folder)
    src = (SHARED / "level1" / "51_Argmax_over_a_dimension.py").read_text()
    assert "argmax" in src
    assert bytes_expr.endswith(" + 4193280"), bytes_expr  # the int64 indices out, 8 B each


def test_a_gemm_counts_its_flops_and_float32_is_floored_at_the_fp32_rate(tmp_path):
    folder = import_problem(ROOF / "1_Square_matrix_multiplication_.py", tmp_path, ["float32"])
    task = load_task(folder)
    n = task.spec.shapes[0].dims["N"]
    assert task.spec.roofline.flops == str(2 * n**3)
    assert task.spec.precision.tf32 is False  # KernelBench's float32: PyTorch's defaults
    floor = floor_on(task, task.spec.shapes[0], "float32", H200)
    assert floor is not None and floor.bound == "compute"
    # float32-accurate: operand splitting on the tensor cores (bf16x6 at 989.5 / 6 TFLOP/s,
    # 3xTF32 at 494.5 / 3) beats the FP32 units' 67
    assert floor.compute_ms == pytest.approx(2 * n**3 / (989.5e12 / 6) * 1e3)
    text = render_contract(task).text()
    assert "TF32 is not allowed" in text and 'input_precision="ieee"' in text

    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("tf32 = false", "tf32 = true"))
    task = load_task(folder)
    floor = floor_on(task, task.spec.shapes[0], "float32", H200)
    assert floor.compute_ms == pytest.approx(2 * n**3 / 494.5e12 * 1e3)  # TF32 tensor cores
    assert "may round their inputs to TF32" in render_contract(task).text()


def test_a_convolution_counts_the_flops_of_its_multiply_adds(tmp_path):
    folder = import_problem(ROOF / "1_Conv2D_ReLU_BiasAdd.py", tmp_path, ["float32"])
    task = load_task(folder)
    d = task.spec.shapes[0].dims
    src = (ROOF / "1_Conv2D_ReLU_BiasAdd.py").read_text()
    assert "kernel_size = 3" in src
    k = 3
    out_h, out_w = d["height"] - k + 1, d["width"] - k + 1
    macs = d["batch_size"] * d["out_channels"] * out_h * out_w * d["in_channels"] * k * k
    assert task.spec.roofline.flops == str(2 * macs)
