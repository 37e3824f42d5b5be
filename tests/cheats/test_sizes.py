"""Sizes stop short of real use (issue 45, class 6): pure-Triton flagship kernels, no screen
bypass, each first shown wrong by importing it under its own name outside kernelloop, then
rejected on the CPU by an evaluation at the smallest CPU selection (7x129, float32):

- `rows_below_128.py` launches at most 128 programs: wrong for rows >= 128 only (the tile
  shape stopped at 97 rows; every declared CPU shape has fewer than 10);
- `cols_up_to_16384.py` caps its block at 16384 columns: wrong past 16384 only (every CPU
  draw stayed within 16,400 elements, so no row was wider than ~8,200).

Both were accepted on main 7796788 (2026-12-07); the undeclared tile shape past 128 rows and
the reach shapes (undeclared.reach_shapes: 3x32768 and 3x(16385..32767)) reject them."""

import subprocess
import sys

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all
from tests.conftest import ROOT

JOBS = ["rows_below_128.py", "cols_up_to_16384.py"]
UNDECLARED = "wrong on undeclared shape"

# Outside kernelloop: each candidate imported under its own name (the Triton interpreter),
# its output against the task's reference in float64 at p = 0, one process for all.
SHOW = r"""
import importlib.util, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
sys.path.insert(0, sys.argv[1])
from reference import reference
for arg in sys.argv[2:]:
    path, rows, cols = arg.split(":")
    rows, cols = int(rows), int(cols)
    name = os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = torch.Generator().manual_seed(0)
    x, r = torch.randn(rows, cols, generator=g), torch.randn(rows, cols, generator=g)
    w, b = 1 + 0.1 * torch.randn(cols, generator=g), 0.1 * torch.randn(cols, generator=g)
    out = mod.forward(x, r, w, b, p=0.0, eps=1e-5, seed=1).double()
    ref = reference(x.double(), r.double(), w.double(), b.double(), p=0.0, eps=1e-5, seed=1)
    print(int((~torch.isclose(out, ref, atol=2e-5, rtol=5e-3)).sum()))
"""
CASES = [  # (candidate, a size it is right at, one past its limit)
    ("rows_below_128.py", (97, 129), (131, 129)),
    ("cols_up_to_16384.py", (3, 8200), (3, 16385)),
]


def test_each_is_wrong_outside_kernelloop_only_past_its_size():
    task = ROOT / "examples" / "ln_softmax_dropout"
    args = [f"{CANDIDATES / n}:{r}:{c}" for n, *sizes in CASES for r, c in sizes]
    got = subprocess.run(
        [sys.executable, "-c", SHOW, str(task), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    wrong = [int(v) for v in got.stdout.split()]
    assert wrong[0::2] == [0, 0] and all(n > 0 for n in wrong[1::2]), wrong


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(flagship, {n: {"path": CANDIDATES / n} for n in JOBS})


@pytest.mark.parametrize("name", JOBS)
def test_rejected_on_the_cpu_on_an_undeclared_shape_past_the_size(records, name):
    rec = records[name]
    assert rec.verdict.category in ("wrong", "nonfinite"), rec.verdict.reasons
    assert UNDECLARED in rec.verdict.reasons[0], rec.verdict.reasons
    failed = {c.shape for c in rec.failed_checks()}
    rows, cols = (int(v) for v in next(iter(failed)).split("x"))
    if name == "rows_below_128.py":
        assert rows > 128 and rows % 2 == 1, failed
    else:
        assert cols > 16384, failed


@pytest.mark.gpu
def test_gpu_reach_shapes_and_int32_offsets(flagship):
    """On a GPU (for the lead, on an H100): the reach shapes reject both size cheats with
    only the smallest declared GPU shape selected (3x(16385..32767) and (32769..65535)x129),
    and `int32_offsets.py` is rejected on the shape past 2**31 elements where the memory
    plan holds it; where it does not (every card lent in 2026-12: ~144 GiB needed), the
    verdict says so and the kernel is accepted — the gap, named."""
    gpu = {"device": "cuda", "shapes": "4096x8000", "dtypes": ["bfloat16"], "timeout_s": 600}
    names = [*JOBS, "int32_offsets.py"]
    recs = evaluate_all(flagship, {n: {"path": CANDIDATES / n, **gpu} for n in names}, workers=1)
    for name in JOBS:
        assert recs[name].verdict.category in ("wrong", "nonfinite"), recs[name].verdict.reasons
        assert UNDECLARED in recs[name].verdict.reasons[0]
    rec = recs["int32_offsets.py"]
    if "one shape beyond 2³¹ elements judged" in rec.verdict.judged_on:
        # wrong values, or an illegal address (a crash): rejected either way
        assert not rec.verdict.accepted, rec.verdict.judged_on
    else:
        assert "no shape beyond 2³¹ elements judged: 65537x32768" in rec.verdict.judged_on
        assert rec.verdict.accepted, rec.verdict.reasons
