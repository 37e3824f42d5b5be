"""The importer's check of the problem's own model against its own tolerance per input case
(task/kernelbench_cases.py): a case the PyTorch baseline itself misses is left out and
said; a miss on the problem's own inputs is said, never hidden."""

from __future__ import annotations

import tomllib
from pathlib import Path

import torch

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem
from kernelloop.task.kernelbench_cases import _miss, unfit_cases

EXTRA = Path(__file__).parent / "fixtures" / "kernelbench_extra"
CPU = {"device": "cpu", "timing": False}


def test_a_miss_is_the_largest_error_beyond_the_tolerance_and_nan_matches_nan():
    ref = torch.tensor([1.0, 2.0, float("nan"), float("inf")], dtype=torch.float64)
    ok = torch.tensor([1.005, 2.0, float("nan"), float("inf")])
    assert _miss(ok, ref, 0.01, 0.0) is None
    bad = torch.tensor([1.5, 2.0, float("nan"), float("inf")])
    assert abs(_miss(bad, ref, 0.01, 0.0) - 0.5) < 1e-6
    assert _miss(torch.tensor([1.0, 2.0, 0.0, float("inf")]), ref, 0.01, 0.01) == float("inf")
    assert _miss(torch.tensor([3, 4]), torch.tensor([3, 5]), 1.0, 1.0) == float("inf")  # exact
    assert _miss(torch.zeros(3), torch.zeros(2, dtype=torch.float64), 1.0, 1.0) == float("inf")


def test_a_case_the_problems_own_model_misses_is_left_out_and_said(tmp_path):
    said: list[str] = []
    folder = import_problem(EXTRA / "ill_conditioned.py", tmp_path, ["float32"], warn=said.append)
    text = (folder / "task.toml").read_text()
    assert tomllib.loads(text)["suites"]["extreme"] == ["mixed_sign"], text
    assert "# large_magnitude is left out: the problem's own model in float32 misses" in text
    assert len(said) == 1 and "large_magnitude case is left out" in said[0], said
    assert "ill_conditioned.py" in said[0] and "max abs err" in said[0], said
    # With the case gone the baseline is accepted, and the other case still runs.
    task = load_task(folder)
    rec = evaluate(task, folder / "baseline.py", **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
    assert {c.case for c in rec.checks if c.suite == "extreme"} == {"mixed_sign"}


def test_a_miss_on_the_problems_own_inputs_is_said_and_nothing_is_dropped_for_it(tmp_path):
    # The same problem judged with a tolerance its float32 model cannot meet anywhere.
    said: list[str] = []
    folder = import_problem(
        EXTRA / "ill_conditioned.py", tmp_path, ["float32"], atol=1e-6, rtol=0.0,
        warn=said.append,
    )  # fmt: skip
    text = (folder / "task.toml").read_text()
    assert "# On its own inputs the problem's own model in float32 misses atol 1e-06" in text
    assert any("random inputs" in w and "--atol/--rtol" in w for w in said), said
    task = load_task(folder)
    shapes = [s.dims for s in task.spec.cpu_shapes]
    assert "random" in unfit_cases(folder, shapes, {"float32": (1e-6, 0.0)})
    # Growing the CPU shape was tried, as far as the problem's own size, and did not cure it.
    assert any("is kept: grown as far as 64x1024" in w for w in said), said
    rec = evaluate(task, folder / "baseline.py", **CPU)
    assert not rec.verdict.accepted and rec.verdict.category == "wrong", rec.verdict.reasons


def test_a_problem_its_own_model_meets_keeps_every_case(tmp_path):
    said: list[str] = []
    folder = import_problem(EXTRA / "small_softmax.py", tmp_path, ["float32"], atol=1e-7,
                            rtol=1e-2, warn=said.append)  # fmt: skip
    assert said == []
    text = (folder / "task.toml").read_text()
    assert tomllib.loads(text)["suites"]["extreme"] == ["mixed_sign", "large_magnitude"]


def test_a_cpu_shape_too_small_for_the_problems_own_model_is_grown_until_it_meets_it(tmp_path):
    # A mean over the batch of sin(3e6 x): float32 misses 1e-2 at the 2 rows the scaling
    # reaches and meets it at a few hundred (fixture's header).
    said: list[str] = []
    src = EXTRA / "small_batch_mean.py"
    folder = import_problem(src, tmp_path, ["float32"], warn=said.append)
    text = (folder / "task.toml").read_text()
    rows = [s["dims"]["batch_size"] for s in tomllib.loads(text)["cpu_shapes"]]
    assert len(rows) == 1 and 128 <= rows[0] < 4096, text
    assert f"# the CPU shape 2 is grown to {rows[0]}: the problem's own model misses" in text
    assert any(f"grown to {rows[0]}" in w for w in said), said
    assert not any("random inputs" in w for w in said), said  # the miss is cured, not said
    task = load_task(folder)
    rec = evaluate(task, folder / "baseline.py", **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
    # At the shape the scaling chose, the problem's own model misses on its own inputs:
    # the growth is what makes the baseline pass.
    assert "random" in unfit_cases(folder, [{"batch_size": 2}], {"float32": (0.01, 0.01)})


def test_a_miss_no_growth_cures_loosens_the_tolerance_to_what_the_model_meets(tmp_path):
    # sin(3e5 x): float32's spacing at 3e5 is 0.03, so PyTorch's own model is 1e-2 to 3e-2
    # from float64 at every size (fixture's header).
    said: list[str] = []
    folder = import_problem(EXTRA / "rounded_phase.py", tmp_path, ["float32"], warn=said.append)
    text = (folder / "task.toml").read_text()
    tol = tomllib.loads(text)["tolerances"]["float32"]
    # The smallest power of two of KernelBench's 1e-2 that the model meets by half.
    assert tol == {"atol": 0.04, "rtol": 0.04}, tol
    assert "# the problem's own model in float32 misses atol 0.01, rtol 0.01" in text
    assert any("the task uses atol 0.04, rtol 0.04 (4x)" in w for w in said), said
    assert any("is kept: grown as far as 256x512" in w for w in said), said  # tried first
    shapes = [s.dims for s in load_task(folder).spec.cpu_shapes]
    assert "random" in unfit_cases(folder, shapes, {"float32": (0.01, 0.01)})
    assert unfit_cases(folder, shapes, {"float32": (0.04, 0.04)}).keys() == {"large_magnitude"}
    rec = evaluate(load_task(folder), folder / "baseline.py", **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
    # Still a check: a constant and zeros fail it (the sensitivity proof is in the record).
    assert any(c.suite == "sensitivity" and c.passed for c in rec.checks), rec.checks


def test_a_model_whose_float32_output_rounding_decides_is_refused_as_proving_nothing(tmp_path):
    # sin(3e7 x): float32's spacing there is 2, every element is noise (as KernelBench
    # level3/24's). The tolerance it would take lets a constant pass: the task's fault.
    said: list[str] = []
    folder = import_problem(EXTRA / "rounding_decides.py", tmp_path, ["float32"], warn=said.append)
    assert tomllib.loads((folder / "task.toml").read_text())["tolerances"]["float32"]["atol"] > 1
    assert any("refused as proving nothing" in w for w in said), said
    rec = evaluate(load_task(folder), folder / "baseline.py", **CPU)
    assert not rec.verdict.accepted and rec.verdict.category == "setup", rec.verdict
    assert any("no planned check rejects a trivial output" in r for r in rec.verdict.reasons)
