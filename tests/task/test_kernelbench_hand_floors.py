"""The floors of the twelve shared KernelBench problems (issue 34's acceptance: "floors
within 5% of hand-computed ones"), float32 on an H200, at the problems' own sizes.

kernelloop's floor: the terms the importer writes into task.toml's [roofline]
(`roofline_terms` on the meta device: no kernel runs) through `floor_with` and the H200's
ceilings from peaks.toml. The hand computation below counts, from each problem's source,
every input, weight and output once at its dtype's size and the multiply-adds of its
GEMMs and convolution (2 flops each), and divides by this test's own H200 rates:

- DRAM: 4.27 TB/s, the project's measured copy-class rate (shared/GPU.md, torch.add);
- float32 compute under KernelBench's no-TF32 contract: the fastest float32-accurate way,
  bf16x6 on the tensor cores (989.5 / 6 = 164.9 TFLOP/s dense), above 3xTF32 (494.5 / 3 =
  164.8) and the FP32 units (67).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernelloop.task import load_task
from kernelloop.task.kernelbench_roofline import roofline_terms
from kernelloop.task.roofline import floor_with, reference_ceiling
from kernelloop.task.spec import Shape
from tests.conftest import ROOT

PROBLEMS = Path(__file__).parent / "fixtures" / "kernelbench_shared"  # shared/kernelbench (MIT)
BW = 4.27e12  # bytes/s
FP32_ACCURATE = 989.5e12 / 6  # flop/s
F32, I64 = 4, 8

# problem -> (bytes, flops), by hand from the problem file's sizes
HAND = {
    # x and out, 4096 x 393216
    "level1/19_ReLU.py": (2 * 4096 * 393216 * F32, 0),
    # A, B, C of 4096 x 4096; 2 N^3 flops
    "level1/1_Square_matrix_multiplication_.py": (3 * 4096**2 * F32, 2 * 4096**3),
    "level1/23_Softmax.py": (2 * 4096 * 393216 * F32, 0),
    # x and out of 112 x 64 x 512 x 512
    "level1/36_RMSNorm_.py": (2 * 112 * 64 * 512 * 512 * F32, 0),
    # x and out of 16 x 64 x 256 x 256, weight and bias of 64 x 256 x 256
    "level1/40_LayerNorm.py": ((2 * 16 + 2) * 64 * 256 * 256 * F32, 0),
    # x of 128 x 4096 x 4095 float32, the index out of 128 x 4095 int64
    "level1/51_Argmax_over_a_dimension.py": (128 * 4096 * 4095 * F32 + 128 * 4095 * I64, 0),
    "level1/89_cumsum.py": (2 * 32768 * 32768 * F32, 0),
    # logits 32768 x 4096, targets 32768 int64, a scalar loss
    "level1/95_CrossEntropyLoss.py": ((32768 * 4096 + 1) * F32 + 32768 * I64, 0),
    # x 1024 x 8192, W 8192 x 8192, b 8192, out 1024 x 8192; 2 M N K
    "level2/12_Gemm_Multiply_LeakyReLU.py": (
        (1024 * 8192 + 8192 * 8192 + 8192 + 1024 * 8192) * F32,
        2 * 1024 * 8192 * 8192,
    ),
    # x 128x64x128x128, W 128x64x3x3, conv bias 128, bias 128, out 128x128x126x126;
    # 2 x (output elements) x (Cin x 3 x 3) flops
    "level2/1_Conv2D_ReLU_BiasAdd.py": (
        (128 * 64 * 128 * 128 + 128 * 64 * 9 + 128 + 128 + 128 * 128 * 126 * 126) * F32,
        2 * (128 * 128 * 126 * 126) * (64 * 9),
    ),
    # x 16384 x 4096, W 4096 x 4096, b 4096, out 16384 x 4096
    "level2/40_Matmul_Scaling_ResidualAdd.py": (
        (16384 * 4096 + 4096 * 4096 + 4096 + 16384 * 4096) * F32,
        2 * 16384 * 4096 * 4096,
    ),
    # x 128 x 16384; weights 16384^2, 16384^2, 8192 x 16384 and their biases; out 128 x 8192
    "level3/1_MLP.py": (
        (128 * 16384 + 2 * 16384**2 + 2 * 16384 + 8192 * 16384 + 8192 + 128 * 8192) * F32,
        2 * 128 * (16384 * 16384 * 2 + 16384 * 8192),
    ),
}


@pytest.fixture(scope="module")
def task():
    """A task to carry the imported terms: the precision contract an import writes
    (`[precision] tf32 = false`), roofline replaced per problem."""
    base = load_task(ROOT / "examples" / "matmul_bias_gelu")
    spec = base.spec.model_copy(
        update={"precision": base.spec.precision.model_copy(update={"tf32": False})}
    )
    return dataclasses.replace(base, spec=spec)


def test_the_shared_set_is_the_twelve_problems():
    assert sorted(str(p.relative_to(PROBLEMS)) for p in PROBLEMS.rglob("*.py")) == sorted(HAND)


@pytest.mark.parametrize("problem", sorted(HAND))
def test_the_h200_floor_is_within_5_percent_of_the_hand_computed_one(task, problem):
    terms = roofline_terms(PROBLEMS / problem, {})  # the problem's own sizes
    assert not terms.note, terms.note
    roof = task.spec.roofline.model_copy(
        update={"bytes": terms.bytes_expr(), "flops": str(terms.flops)}
    )
    imported = dataclasses.replace(task, spec=task.spec.model_copy(update={"roofline": roof}))
    floor = floor_with(imported, Shape(dims={"n": 1}), "float32", reference_ceiling(imported))
    hand_bytes, hand_flops = HAND[problem]
    hand_ms = max(hand_bytes / BW, hand_flops / FP32_ACCURATE) * 1e3
    assert floor.ms == pytest.approx(hand_ms, rel=0.05), (problem, floor, hand_ms)
    assert floor.bound == ("compute" if hand_flops / FP32_ACCURATE > hand_bytes / BW else "memory")
