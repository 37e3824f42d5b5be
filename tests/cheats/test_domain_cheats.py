"""Issue 45, classes 4 and 5, red team: kernels right on the values a narrow judge passes
and wrong on the operator's real-use domain — eps hard-coded or outside the root, the
LayerNorm weight taken as |w|, a KernelBench LayerNorm that ignores its weight and bias or
drops eps. Each was accepted before the task declared its `[domain]` and drew trained-like
weights (tests/cheats/candidates/domain_*, rms_*, kb_ln_*: each shown wrong by running it
outside kernelloop, below); now each is rejected on the CPU, and the honest kernels of the
same tasks are accepted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem
from tests.cheats.runner import CANDIDATES, evaluate_all
from tests.conftest import FUSED, ROOT

RMS = ROOT / "examples" / "add_rmsnorm"
KB_LN = ROOT / "tests" / "task" / "fixtures" / "kernelbench" / "level1" / "40_LayerNorm.py"
KB_SOLUTION = ROOT / "benchmarks" / "kernelbench_solutions" / "level1_40_LayerNorm" / "layernorm.py"

FLAGSHIP_WRONG = ["domain_eps_hardcoded.py", "domain_eps_outside_root.py", "domain_abs_weight.py"]
RMS_WRONG = ["rms_eps_hardcoded.py", "rms_abs_weight.py"]
KB_WRONG = ["kb_ln_affine_ignored.py", "kb_ln_no_eps.py"]


@pytest.fixture(scope="module")
def flagship_records(flagship):
    jobs = {n: {"path": CANDIDATES / n} for n in FLAGSHIP_WRONG}
    jobs["honest"] = {"path": FUSED}
    return evaluate_all(flagship, jobs)


@pytest.fixture(scope="module")
def rms_records():
    task = load_task(RMS)
    jobs = {n: {"path": CANDIDATES / n, "shapes": "7x129"} for n in RMS_WRONG}
    jobs["honest"] = {"path": RMS / "candidates" / "fused.py", "shapes": "7x129"}
    return evaluate_all(task, jobs)


@pytest.fixture(scope="module")
def kb_records(tmp_path_factory):
    folder = import_problem(KB_LN, tmp_path_factory.mktemp("kb_ln"), ["float32"])
    task = load_task(folder)
    jobs = {n: {"path": CANDIDATES / n, "shapes": None} for n in KB_WRONG}
    jobs["honest"] = {"path": KB_SOLUTION, "shapes": None}
    return evaluate_all(task, jobs)


@pytest.mark.parametrize("name", FLAGSHIP_WRONG)
def test_flagship_kernels_wrong_off_the_listed_values_are_rejected(flagship_records, name):
    rec = flagship_records[name]
    assert not rec.verdict.accepted, rec.verdict.reasons
    assert rec.verdict.category == "wrong", rec.verdict.reasons


@pytest.mark.parametrize("name", RMS_WRONG)
def test_add_rmsnorm_kernels_wrong_off_the_listed_values_are_rejected(rms_records, name):
    rec = rms_records[name]
    assert not rec.verdict.accepted, rec.verdict.reasons
    assert rec.verdict.category == "wrong", rec.verdict.reasons


@pytest.mark.parametrize("name", KB_WRONG)
def test_kernelbench_layernorm_kernels_right_only_at_the_init_are_rejected(kb_records, name):
    rec = kb_records[name]
    assert not rec.verdict.accepted, rec.verdict.reasons
    assert rec.verdict.category == "wrong", rec.verdict.reasons


@pytest.mark.parametrize("which", ["flagship", "rms", "kb"])
def test_the_honest_kernels_of_the_same_tasks_are_accepted(
    which, flagship_records, rms_records, kb_records
):
    rec = {"flagship": flagship_records, "rms": rms_records, "kb": kb_records}[which]["honest"]
    assert rec.verdict.accepted, rec.verdict.reasons


# Run in a fresh interpreter: TRITON_INTERPRET is read when triton is imported.
OUTSIDE = """
import importlib.util, sys
import torch

def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

g = torch.Generator().manual_seed(3)
x = 1e-3 * torch.randn(4, 129, generator=g)  # a row's variance below eps
r = torch.randn(4, 129, generator=g)
w = 1 + 0.5 * torch.randn(129, generator=g)
b = 0.2 * torch.randn(129, generator=g)
for path in sys.argv[1:]:
    mod = load(path)
    if "rms_" in path:
        y, _ = mod.forward(x, r, w, eps=1e-2)
        h = (x + r).double()
        want = h / (h.pow(2).mean(-1, keepdim=True) + 1e-2).sqrt() * w.double()
        err = (y.double() - want).abs().max().item()
    else:
        eps = 1e-2 if "hardcoded" in path else 1e-5
        got = mod.forward(x, r, w, b, p=0.0, eps=eps, seed=1)
        y = torch.nn.functional.layer_norm(x.double(), (129,), w.double(), b.double(), eps)
        err = (got.double() - (r.double() + torch.softmax(y, -1))).abs().max().item()
    print(path.rsplit("/", 1)[-1], err)
"""


def test_each_red_team_kernel_is_wrong_outside_kernelloop():
    """The kernels are wrong on their own, in plain PyTorch terms (Triton's interpreter, a
    fresh process), where the domain reaches: a row of small variance, eps = 1e-2, a
    negative weight."""
    names = [*FLAGSHIP_WRONG, *RMS_WRONG]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", OUTSIDE, *(str(CANDIDATES / n) for n in names)],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    ).stdout  # fmt: skip
    errors = dict(line.split() for line in out.splitlines())
    assert sorted(errors) == sorted(names)
    assert all(float(e) > 1e-3 for e in errors.values()), errors
