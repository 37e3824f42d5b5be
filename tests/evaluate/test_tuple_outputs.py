"""Several outputs (issue 14): a fused residual-add + RMSNorm that returns `(y, h)` — the
most common fused kernel in LLM inference — judged output by output, each against its
float64 reference, in correctness and in the timed benchmark (packed, committed and
audited as one). Plain PyTorch on the CPU (language "torch": its timings count)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from tests import busy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"
ONE = {"device": "cpu", "timing": False, "shapes": "256x1024"}

REFERENCE = """
import torch


def reference(x, residual, weight, eps):
    h = x + residual
    y = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * weight
    return y, h
"""

FORWARD = """
import torch


def forward(x, residual, weight, *, eps):
    h = x + residual
    y = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * weight
    return {RETURN}
"""


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tuple") / "add_rmsnorm"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    (folder / "reference.py").write_text(REFERENCE)
    (folder / "baseline.py").write_text(FORWARD.replace("{RETURN}", "y, h"))
    toml = folder / "task.toml"
    text = toml.read_text().replace('output_like = "x"', 'output_like = ""')
    text = text.split("\n[e2e]")[0]  # cpu_task's model is built on its one-output op
    toml.write_text(text.replace('name = "cpu_rmsnorm_residual"', 'name = "add_rmsnorm"'))
    return load_task(folder)


def _cand(task, name: str, ret: str) -> Path:
    path = task.folder / f"{name}.py"
    path.write_text(FORWARD.replace("{RETURN}", ret))
    return path


def test_a_tuple_of_outputs_is_judged_output_by_output(task):
    rec = evaluate(task, task.baseline_path, device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    # a list is as good as a tuple
    assert evaluate(task, _cand(task, "as_list", "[y, h]"), **ONE).verdict.accepted
    # the second output wrong: named
    rec = evaluate(task, _cand(task, "h_wrong", "y, h * 1.01"), **ONE)
    assert rec.verdict.category == "wrong"
    assert any("output 1:" in r for r in rec.verdict.reasons), rec.verdict.reasons
    assert not any("output 0:" in r for r in rec.verdict.reasons), rec.verdict.reasons
    # the first output returned twice: output 1 is wrong
    rec = evaluate(task, _cand(task, "twice", "y, y.clone()"), **ONE)
    assert any("output 1:" in r for r in rec.verdict.reasons), rec.verdict.reasons
    assert any("matches the reference's output 0 instead" in r for r in rec.verdict.reasons)
    # the outputs swapped (same shape and dtype): named as such
    rec = evaluate(task, _cand(task, "swapped", "h, y"), **ONE)
    assert rec.verdict.category == "wrong"
    assert any(
        "output 0:" in r and "outputs 0 and 1 are swapped: returned in the wrong order" in r
        for r in rec.verdict.reasons
    ), rec.verdict.reasons


def test_the_interface_of_several_outputs(task):
    rec = evaluate(task, _cand(task, "only_y", "y"), **ONE)
    assert rec.verdict.category == "interface"
    assert any("expected a tuple of 2 torch.Tensor" in r for r in rec.verdict.reasons)
    rec = evaluate(task, _cand(task, "three", "y, h, h.clone()"), **ONE)
    assert any("with 3 tensor(s), expected a tuple of 2" in r for r in rec.verdict.reasons)
    rec = evaluate(task, _cand(task, "shared", "y, y"), **ONE)
    assert rec.verdict.category == "aliasing", rec.verdict.reasons
    rec = evaluate(task, _cand(task, "wrong_dtype", "y, h.double()"), **ONE)
    assert any("output 1 dtype float64, expected float32" in r for r in rec.verdict.reasons)
    rec = evaluate(task, _cand(task, "passthrough", "y, x + residual * 0"), **ONE)
    assert rec.verdict.category in ("wrong", "trivial"), rec.verdict.reasons


def test_several_outputs_are_timed_committed_and_audited(task):
    # Measured again while a busy machine refuses to time (tests/busy.py): a refusal
    # would show neither the timing nor the audit this test is about.
    honest = _cand(task, "timed", "y, h")
    rec = busy.measured(
        lambda: benchmark(task, honest, device="cpu", shapes="256x1024"),
        lambda r: r.problems,
        "the tuple-output benchmark",
    )
    assert rec.problems == [], rec.problems
    assert rec.shapes[0].impls["candidate"].median_ms > 0
    lazy = _cand(task, "timed_lazy", "y, residual.clone()")
    rec = busy.measured(
        lambda: benchmark(task, lazy, device="cpu", shapes="256x1024", screen=False),
        lambda r: r.problems,
        "the lazy tuple-output benchmark",
    )
    assert any("differs from the reference" in p and "output 1" in p for p in rec.problems), (
        rec.problems
    )
