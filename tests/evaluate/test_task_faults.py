"""A task's own code failing is the task's fault, not the candidate's (KernelBench survey,
2026-12-01: an imported LSTM's reference raised at a size it could not take, and the
evaluation called that the candidate's protocol violation)."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"

REFERENCE = """
import torch


def reference(x, residual, weight, *, eps):
    if x.shape[1] == 512:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (the task's own bug)")
    rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return residual + x / rms * weight
"""


def test_a_reference_that_fails_is_a_setup_rejection_naming_the_task(tmp_path):
    folder = tmp_path / "faulty"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    (folder / "reference.py").write_text(REFERENCE)
    task = load_task(folder)
    rec = evaluate(task, task.baseline_path, device="cpu", timing=False, shapes="512x512")
    assert rec.verdict.category == "setup", rec.verdict.reasons
    assert (
        "the task's inputs or reference failed on this call (RuntimeError: mat1"
        in (rec.verdict.reasons[0])
    )
    assert "not the candidate" in rec.verdict.reasons[0]
    assert not any("protocol" in r or "could not use" in r for r in rec.verdict.reasons)
