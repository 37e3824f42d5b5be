"""The import's float32 tolerance (1e-4, task/kernelbench.py TOLERANCE) against a kernel
that is wrong the way one was accepted on the H200 at KernelBench's 1e-2 (2026-12-03,
`kernelloop gate-check` on level1/95 at 32768x4096): its mean over the batch sums the
first rows' losses again and again instead of every row's, ~1e-3 off. The CPU shapes
have fewer rows than the mean's block, so here the same kind of error comes from a mean
that leaves out the last row: at 128 rows (losses ~4.2 +- 1) it is |loss_last - mean| /
128 ~ 8e-3, inside KernelBench's atol + rtol |mean| ~ 5.2e-2 unless the last loss is 6.6
sigma out, and outside 1e-4's ~5.2e-4 unless it is within 0.07 of the mean (~5% a call,
on every one of the evaluation's calls at once)."""

import tomllib
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "tests" / "task" / "fixtures" / "kernelbench" / "level1" / "95_CrossEntropyLoss.py"
SOLUTION = ROOT / "benchmarks" / "candidates" / "kernelbench" / "level1_95_cross_entropy.py"
CPU = {"device": "cpu", "timing": False, "shapes": "128x256"}  # the CPU shape of 128 rows


def _first_rows_mean(tmp_path: Path) -> Path:
    src = SOLUTION.read_text()
    old = "losses, weights, out, n_rows, BLOCK"
    assert src.count(old) == 1
    src = src.replace(old, "losses, weights, out, n_rows - 1, BLOCK")  # the last row left out
    path = tmp_path / "first_rows_mean.py"
    path.write_text(src)
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    base = tmp_path_factory.mktemp("kb95")
    default = import_problem(PROBLEM, base / "default", ["float32"])
    kernelbench = import_problem(PROBLEM, base / "kb", ["float32"], atol=1e-2, rtol=1e-2)
    return default, kernelbench, _first_rows_mean(base)


def test_the_float32_default_is_1e_4_and_says_why_in_the_task(imported):
    default, _, _ = imported
    text = (default / "task.toml").read_text()
    tol = tomllib.loads(text)["tolerances"]["float32"]
    assert tol["atol"] == 1e-4 and tol["rtol"] == 1e-4, tol
    assert "[precision]\ntf32 = false" in text


def test_a_mean_over_the_first_rows_only_is_rejected_at_1e_4_and_passed_kernelbenchs_1e_2(
    imported,
):
    default, kernelbench, wrong = imported
    rec = evaluate(load_task(default), wrong, **CPU)
    assert not rec.verdict.accepted and rec.verdict.category == "wrong", rec.verdict
    # The same kernel under KernelBench's own check: accepted — the hole 1e-4 closes.
    loose = evaluate(load_task(kernelbench), wrong, **CPU)
    assert loose.verdict.accepted, loose.verdict.reasons
    # The honest solution passes the default.
    honest = evaluate(load_task(default), SOLUTION, **CPU)
    assert honest.verdict.accepted, honest.verdict.reasons
