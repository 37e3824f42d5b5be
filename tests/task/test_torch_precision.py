"""The precision contract reaches PyTorch's own code (task/torch_precision.py): PyTorch's
default is TF32 for cuDNN convolutions, so a KernelBench convolution's eager baseline, its
torch.compile slot and the judge's run of the task's own model computed at TF32 while the
candidate was held to full float32 (H200 suite, 2026-12-05). On the CPU the flags change no
arithmetic, so each test uses code that reads them — a stand-in for a cuDNN convolution —
in a real evaluation (sandboxed workers, the trusted judge) of the cpu_task example."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.torch_precision import pin, pinned

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent / "precision_candidates"
ONE = {"device": "cpu", "shapes": "256x1024", "timing": False, "workers": 1}
E2E = "# The end-to-end check"
TOL = "float32 = { atol = 1e-5, rtol = 1e-4 }"

# The task's own model as PyTorch computes a float32 convolution at cuDNN's default: 1e-3
# off wherever TF32 is on (float64, the judge's reference, never is).
TF32_MODEL = """

_exact = reference


def reference(x, residual, weight, *, eps):
    out = _exact(x, residual, weight, eps=eps)
    if out.dtype == torch.float32 and torch.backends.cudnn.allow_tf32:
        out = out * (1.0 + 1e-3)
    return out
"""


def _task(tmp_path: Path, *, tf32: bool, margin: bool = False, tf32_model: bool = False):
    folder = tmp_path / f"task_{tf32}_{margin}"
    shutil.copytree(ROOT / "examples" / "cpu_task", folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    assert E2E in text and TOL in text
    text = text[: text.index(E2E)]  # per-op checks only: the e2e model has its own margin
    if margin:
        text = text.replace(TOL, TOL[:-2] + ", model_margin = 8 }")
    toml.write_text(text + f"\n[precision]\ntf32 = {'true' if tf32 else 'false'}\n")
    if tf32_model:
        ref = folder / "reference.py"
        ref.write_text(ref.read_text() + TF32_MODEL)
    return load_task(folder)


def test_pinned_sets_both_flags_and_puts_them_back():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        pin(True)
        with pinned(False):
            assert not torch.backends.cuda.matmul.allow_tf32
            assert not torch.backends.cudnn.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        pin(False)
        with pinned(True):
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cudnn.allow_tf32
    finally:
        pin(False)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_the_worker_runs_implementations_at_the_contract_not_at_pytorchs_defaults(tmp_path):
    # A fresh worker process starts at PyTorch's defaults (cuDNN TF32 on): without the
    # worker's pin the flag reader is 1% off under either contract. (The static screen
    # refuses a candidate that touches torch.backends; screen=False judges the worker.)
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default, which the worker overrides
    full = _task(tmp_path, tf32=False)
    rec = evaluate(full, HERE / "flag_reader.py", screen=False, **ONE)
    assert rec.verdict.accepted, rec.verdict.reasons
    allowed = _task(tmp_path, tf32=True)
    rec = evaluate(allowed, HERE / "flag_reader.py", screen=False, **ONE)
    assert rec.verdict.category == "wrong", rec.verdict.reasons


def test_the_judges_own_model_runs_at_the_contract_so_tf32_does_not_widen_the_tolerance(
    tmp_path,
):
    # The task's own model is 1e-3 off where TF32 is on. At `tf32 = false` the judge runs it
    # at full float32: no widening, and a candidate 5e-4 off is wrong. Where the contract
    # allows TF32 the model's own TF32 error is the task's doing and widens the tolerance
    # (model_margin 8): the same candidate passes — the flag, not the test, decides.
    torch.backends.cudnn.allow_tf32 = True  # the trusted process at PyTorch's default
    full = _task(tmp_path, tf32=False, margin=True, tf32_model=True)
    rec = evaluate(full, HERE / "biased_5e4.py", **ONE)
    assert rec.verdict.category == "wrong", rec.verdict.reasons
    assert torch.backends.cudnn.allow_tf32  # the judge put the process's flag back
    allowed = _task(tmp_path, tf32=True, margin=True, tf32_model=True)
    rec = evaluate(allowed, HERE / "biased_5e4.py", **ONE)
    assert rec.verdict.accepted, rec.verdict.reasons


def test_the_timing_workers_run_implementations_at_the_contract(tmp_path):
    # The benchmark's own workers (one per implementation) pin the flags too: the timed
    # outputs are audited against the float64 reference, so the flag reader's timed calls
    # are right at `tf32 = false` and 1% off — caught by the audit — where TF32 is allowed.
    audit = "the timed output differs from the reference"
    bench = {"device": "cpu", "shapes": "256x1024", "max_s_per_shape": 0.3, "aa": False}
    full = _task(tmp_path, tf32=False)
    rec = benchmark(full, HERE / "flag_reader.py", screen=False, **bench)
    assert not any(audit in p for p in rec.problems), rec.problems
    allowed = _task(tmp_path, tf32=True)
    rec = benchmark(allowed, HERE / "flag_reader.py", screen=False, **bench)
    assert any(audit in p and "candidate" in p for p in rec.problems), rec.problems
