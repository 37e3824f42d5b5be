"""Generic extreme cases (issue 14): a task that lists no extreme cases is still judged on
large, offset, tiny, constant and spiky inputs, built from its `random` inputs the same way
on both sides of the trust boundary; `extreme = []` runs none. Plain PyTorch on the CPU."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.values.compare import within_tolerance
from kernelloop.task import load_task
from kernelloop.task.generic_cases import CASES, with_generic_cases
from kernelloop.task.spec import Tolerance

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"
ONE = {"device": "cpu", "timing": False, "shapes": "256x1024"}

# RMSNorm without its eps: within 5e-7 of the reference on N(0, 1) rows, 41% off on rows
# of values ~1e-3 (mean(x²) ~1e-6, eps 1e-6).
NO_EPS = """
import torch


def forward(x, residual, weight, *, eps):
    rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True))
    return residual + x / rms * weight
"""


def _task(tmp_path: Path, extreme: str | None):
    folder = tmp_path / "task"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    toml = folder / "task.toml"
    text = re.sub(r"extreme = \[[^\]]*\]\n", "" if extreme is None else extreme, toml.read_text())
    toml.write_text(text)
    return load_task(folder)


def _toy(dims, dtype, device, generator, case="random"):
    assert case == "random", case
    return {
        "x": torch.randn(dims["rows"], dims["cols"], generator=generator).to(dtype),
        "index": torch.arange(dims["rows"]),
        "eps": 1e-6,
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_generic_cases_transform_floats_only_and_are_the_same_on_both_sides(dtype):
    make = with_generic_cases(_toy)
    dims = {"rows": 64, "cols": 256}
    base = make(dims, dtype, "cpu", torch.Generator().manual_seed(7))
    for case in CASES:
        a = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), case)
        b = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), case)
        assert torch.equal(a["x"], b["x"]), case  # the judge's and the worker's inputs agree
        assert a["x"].dtype == dtype and torch.equal(a["index"], base["index"]), case
        assert a["eps"] == 1e-6
        assert bool(torch.isfinite(a["x"]).all()), case
    scale = 16.0 if dtype == torch.float16 else 1e3
    big = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), "generic_large_magnitude")
    assert float(big["x"].abs().max()) > 0.5 * scale * float(base["x"].abs().max())
    off = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), "generic_large_offset")
    assert float(off["x"].float().mean()) == pytest.approx(scale, rel=0.05)
    const = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), "generic_constant")
    assert torch.unique(const["x"]).numel() == 1
    spikes = make(dims, dtype, "cpu", torch.Generator().manual_seed(7), "generic_mixed_spikes")
    ratio = spikes["x"].float().abs() / base["x"].float().abs().clamp_min(1e-30)
    assert 0.002 < float((ratio > 2).float().mean()) < 0.03  # ~1% spikes
    assert 0.4 < float((spikes["x"] < 0).float().mean()) < 0.6  # mixed signs
    # A case the task knows goes to the task unchanged.
    with pytest.raises(AssertionError, match="large"):
        make(dims, dtype, "cpu", torch.Generator().manual_seed(7), "large")


def test_a_task_without_extreme_cases_is_judged_on_the_generic_ones(tmp_path):
    task = _task(tmp_path, extreme=None)
    assert task.spec.suites.extreme is None
    assert task.spec.suites.extreme_cases == list(CASES)
    rec = evaluate(task, task.baseline_path, **ONE)
    assert rec.verdict.accepted, rec.verdict.reasons
    ran = {c.case for c in rec.checks if c.suite == "extreme"}
    assert ran == set(CASES), ran
    cand = tmp_path / "no_eps.py"
    cand.write_text(NO_EPS)
    rec = evaluate(task, cand, **ONE)
    assert not rec.verdict.accepted
    assert rec.verdict.category == "wrong", rec.verdict
    failed = {c.case for c in rec.checks if not c.passed}
    assert "generic_tiny" in failed, rec.verdict.reasons
    assert not any(c.suite == "random" and not c.passed for c in rec.checks)


def test_an_empty_list_runs_no_extreme_case(tmp_path):
    task = _task(tmp_path, extreme="extreme = []\n")
    assert task.spec.suites.extreme_cases == []
    cand = tmp_path / "no_eps.py"
    cand.write_text(NO_EPS)
    rec = evaluate(task, cand, **ONE)
    assert not any(c.suite == "extreme" for c in rec.checks)
    assert rec.verdict.accepted, rec.verdict.reasons  # what no case tests, nothing catches


def test_a_nan_reference_wants_nan_and_an_infinite_one_the_same_infinity():
    tol = Tolerance(atol=1e-5, rtol=1e-4)
    ref = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")], dtype=torch.float64)
    assert within_tolerance(ref.clone().float(), ref, tol).passed
    wrong_nan = torch.tensor([1.0, 0.0, float("inf"), float("-inf")])
    assert not within_tolerance(wrong_nan, ref, tol).passed
    wrong_inf = torch.tensor([1.0, float("nan"), float("-inf"), float("-inf")])
    assert not within_tolerance(wrong_inf, ref, tol).passed


def test_cases_with_large_values_widen_only_the_absolute_tolerance(tmp_path):
    # An fp32 RMSNorm + residual on ×1e3 inputs: the output can cancel to ~0.01 while the
    # rounding of its ~1e3 terms is ~6e-5 (18 of 262144 elements failed atol 1e-5 on the
    # CI machine). The judge scales atol by S on those cases, never rtol, never elsewhere.
    from kernelloop.evaluate.trusted.values.judge import Judge
    from kernelloop.evaluate.trusted.values.plan import plan_calls

    task = _task(tmp_path, extreme=None)
    judge = Judge(task, "cpu")
    base = task.spec.tolerances["float32"]
    like = torch.zeros(2)
    by_case = {}
    shapes = [task.find_shape("256x1024")]
    for call in plan_calls(task, shapes, ["float32"], unseen=False).calls:
        by_case[call.case] = judge.tolerance(call, like)
    for case in ("generic_large_magnitude", "generic_large_offset", "generic_mixed_spikes"):
        assert by_case[case].atol == pytest.approx(base.atol * 1e3), case
        assert by_case[case].rtol == base.rtol
    for case in ("generic_tiny", "generic_constant", "random"):
        assert by_case[case] == base, case
