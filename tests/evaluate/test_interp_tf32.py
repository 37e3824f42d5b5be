"""The CPU interpreter's `tl.dot` rounds float32 inputs to TF32 where a GPU would, so a
TF32 kernel is rejected on the CPU by a task whose precision contract forbids TF32, as it
is on the H200 (issue 34); `input_precision="ieee"` is accepted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.worker.interp_tf32 import round_to_tf32
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem

MATMUL = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench_roofline"
CANDIDATE = """
import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BLOCK + tl.arange(0, BLOCK)
    rn = pn * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, N, BLOCK):
        a = tl.load(a_ptr + rm[:, None] * N + (k + rk)[None, :],
                    mask=(rm[:, None] < N) & ((k + rk)[None, :] < N), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < N) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc{PRECISION})
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < N) & (rn[None, :] < N))


def forward(*, A, B):
    n = A.shape[0]
    c = torch.empty_like(A)
    _mm[(triton.cdiv(n, 32), triton.cdiv(n, 32))](A, B, c, n, BLOCK=32)
    return c
"""


def test_rounding_to_tf32_keeps_ten_mantissa_bits_ties_to_even():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-10, np.inf, np.nan, -2.5], np.float32)
    got = round_to_tf32(x)
    assert got[0] == 1.0  # a tie: to the even mantissa
    assert got[1] == np.float32(1 + 2**-9)  # a tie with an odd mantissa: up
    assert got[2] == np.float32(1 + 2**-10)  # already a TF32 value
    assert np.isinf(got[3]) and np.isnan(got[4]) and got[5] == -2.5
    r = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    rel = np.abs(round_to_tf32(r) - r) / np.abs(r)
    assert rel.max() <= 2.0**-11 and rel.max() > 2.0**-13  # TF32's half-ulp, not float32's


def test_a_tf32_dot_is_rejected_on_the_cpu_where_the_task_forbids_tf32(tmp_path):
    folder = import_problem(
        MATMUL / "1_Square_matrix_multiplication_.py", tmp_path, ["float32"], atol=1e-5, rtol=1e-5
    )
    task = load_task(folder)
    assert task.spec.precision.tf32 is False
    verdicts = {}
    for name, precision in (("tf32", ""), ("ieee", ', input_precision="ieee"')):
        cand = tmp_path / f"{name}.py"
        cand.write_text(CANDIDATE.replace("{PRECISION}", precision))
        rec = evaluate(task, cand, device="cpu", timing=False, shapes="64")
        verdicts[name] = rec.verdict
    assert verdicts["ieee"].accepted, verdicts["ieee"].reasons
    assert not verdicts["tf32"].accepted
    assert verdicts["tf32"].category == "wrong", verdicts["tf32"].reasons
    assert "max abs err" in verdicts["tf32"].reasons[0]
