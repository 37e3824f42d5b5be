"""A wrong output told what it is instead (issue 14: wrong candidates rejected with a reason a
user understands). The CPU-native RMSNorm + residual task (plain PyTorch, fast): a kernel
that never reads its weight matches the reference with the weight all ones, one that drops
the residual matches it with the residual all zeros — and the reason says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.values import diagnose
from kernelloop.task import load_task

TASK = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"
ONE = {"device": "cpu", "timing": False, "shapes": "256x1024"}

FORWARD = """
import torch


def forward(x, residual, weight, *, eps):
    xs = x.double()
    y = xs * torch.rsqrt((xs * xs).mean(-1, keepdim=True) + eps) * {WEIGHT}
    return ({RESIDUAL} + y).to(x.dtype)
"""


@pytest.mark.parametrize(
    ("weight", "residual", "says"),
    [
        ("1.0", "residual.double()", "every element of weight = 1: does the kernel read weight?"),
        ("weight.double()", "0.0", "every element of residual = 0: does the kernel read residual?"),
    ],
)
def test_an_input_the_kernel_never_reads_is_named(tmp_path, weight, residual, says):
    cand = tmp_path / "cand.py"
    cand.write_text(FORWARD.replace("{WEIGHT}", weight).replace("{RESIDUAL}", residual))
    rec = evaluate(load_task(TASK), cand, **ONE)
    assert rec.verdict.category == "wrong", rec.verdict.reasons
    assert any(says in r for r in rec.verdict.reasons), rec.verdict.reasons


def test_a_plainly_wrong_output_gets_no_such_guess():
    x = torch.randn(8, 16, dtype=torch.float64)
    w = torch.randn(16, dtype=torch.float64)

    def reference(v):
        return v["x"] * v["w"]

    def close(o, r):
        return torch.allclose(o, r, atol=1e-6, rtol=1e-6)

    inputs = {"x": x, "w": w}
    assert diagnose.ignored_input(inputs, x.clone(), reference, close).endswith(
        "w = 1: does the kernel read w?"
    )
    assert diagnose.ignored_input(inputs, x * w + 1.0, reference, close) == ""
