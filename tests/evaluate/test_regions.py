"""Every region of the output informative (evaluate/trusted/values/regions.py, issue 45).

KernelBench's cumprod of `torch.rand` inputs drives every row to 0 within a few hundred
columns: past there the float64 reference is the same on every draw of every case, so a
kernel that computes nothing there is accepted. The import, `task show` and gate-check's
report name those columns; the flagship's inputs inform every row and column."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console

from kernelloop.commands.gatecheck_cmds import print_report
from kernelloop.evaluate.trusted.values import regions
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.task import load_task
from tests.evaluate.test_gatecheck_ops import _report

CUMPROD = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench_extra" / "cumprod.py"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "400",
            "PATH": "/usr/bin:/bin",
            "TERM": "dumb",
            # this checkout's code where the tests run with PYTHONPATH=src
            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        },
    )


@pytest.fixture(scope="module")
def cumprod(tmp_path_factory):
    """The import (with its `near_one` case, which keeps products alive, and `large_mixed`,
    whose ±inf keeps a sign alive: no weak region), and the same task with those cases
    taken out of its extreme list (KernelBench's own inputs and the other cases: the tail
    columns dead)."""
    out = tmp_path_factory.mktemp("kb")
    done = _cli("import", "kernelbench", str(CUMPROD), "--out", str(out))
    assert done.returncode == 0, done.stderr
    weak = out / "weak"
    shutil.copytree(out / "cumprod", weak)
    toml = weak / "task.toml"
    text = toml.read_text()
    # near_one keeps the products alive; large_mixed's overflow to ±inf keeps a sign alive
    for case in ("near_one", "large_mixed"):
        text = text.replace(f", '{case}'", "").replace(f"'{case}', ", "")
        assert case not in text.split("[suites]")[1][:200]
    toml.write_text(text)
    return weak, done.stdout


def test_the_near_one_case_keeps_every_column_of_cumprod_informative(cumprod):
    _, said = cumprod
    assert "the task's inputs are too weak" not in said, said


def test_without_it_the_dead_columns_of_cumprod_are_named(cumprod):
    folder, _ = cumprod
    line = regions.report_line(load_task(folder), "cpu")
    assert "the task's inputs are too weak" in line, line
    assert "columns ≥ " in line and "never informative" in line, line
    task = load_task(folder)
    found = regions.informative_regions(task)
    dead = [d for d in found.dead if d.axis == "columns"]
    # every CPU shape wider than the products' reach: its tail columns, and no row
    assert dead and all(d.hi == d.size and 100 < d.lo < 400 for d in dead), dead
    assert not [d for d in found.dead if d.axis == "rows"], found.dead
    # Dead for real: a "kernel" that reads only the columns before them (the rest taken
    # as 1: its running product carried on) passes the value check on every case's draw;
    # one that stops at half of that does not.
    judge = Judge(task, "cpu")
    shape = next(s for s in task.spec.cpu_shapes if s.label == dead[-1].shape)
    lo = dead[-1].lo

    def reads_only(call, upto: int) -> bool:
        inputs = judge._inputs(call)
        (name,) = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
        short = inputs[name].clone()
        short[:, upto:] = 1
        ref = judge.value_refs(call)["ref"]
        out = judge._ref({**inputs, name: short}, call)
        tol = judge.tolerance(call, ref, own=False)
        return bool(torch.isclose(out, ref, rtol=tol.rtol, atol=tol.atol, equal_nan=True).all())

    for case in found.cases:
        assert reads_only(regions._call(task, shape, found.dtype, case, 7), lo), case
    # (random inputs die first, ~30 columns; large_magnitude keeps some rows alive longest)
    calls = [regions._call(task, shape, found.dtype, case, 7) for case in found.cases]
    assert not all(reads_only(call, lo // 2) for call in calls)


def test_task_show_says_so_too(cumprod):
    folder, _ = cumprod
    done = _cli("task", "show", str(folder), "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert "warning: the task's inputs are too weak" in done.stdout, done.stdout[-2000:]
    assert "columns ≥ " in done.stdout


def test_the_flagship_informs_every_region(flagship):
    found = regions.informative_regions(flagship)
    assert found.checked == [s.label for s in flagship.spec.cpu_shapes]
    assert found.dead == [] and found.line() is None
    assert regions.report_line(flagship, "cpu") == ""


def test_gate_check_prints_the_report_line():
    line = "the task's inputs are too weak: at 128x250: columns ≥ 210 never informative"
    console = Console(record=True, width=400)
    print_report(_report(weak_inputs=line), console, 0.98, 0.0, False)
    assert line in console.export_text()


def test_runs_and_words():
    flags = torch.tensor([True, False, False, True, False])
    assert regions._runs(flags) == [(1, 3), (4, 5)]
    words = [regions.Dead("3x5", 0, "columns", lo, hi, 5).words() for lo, hi in [(1, 3), (4, 5)]]
    assert words == [
        "at 3x5: columns 1–2 never informative",
        "at 3x5: columns ≥ 4 never informative",
    ]
    assert regions.Dead("3x5", 1, "rows", 0, 3, 3).words() == (
        "at 3x5 (output 1): every one of the 3 rows never informative"
    )


GAPS = CUMPROD.with_name("conv_transpose_gaps.py")


def test_outputs_constant_whatever_the_input_are_not_weak_inputs(tmp_path):
    """A transposed convolution's stride gaps are 0 on every input: rows made of them are
    the same on every draw of every case, yet a kernel must write 0 there (and one that
    does not is caught), so they are not named; under the cases alone they would be
    (checked here), and cumprod's dead columns, which overflow under the wild draws,
    still are (test_without_it_the_dead_columns_of_cumprod_are_named)."""
    done = _cli("import", "kernelbench", str(GAPS), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    task = load_task(tmp_path / "conv_transpose_gaps")
    assert "the task's inputs are too weak" not in done.stdout, done.stdout
    assert regions.report_line(task, "cpu") == ""
    judge = Judge(task, "cpu")
    shape = task.spec.cpu_shapes[0]
    call = regions._call(task, shape, "float32", "random", regions.SEEDS[0])
    ref = judge.value_refs(call)["ref"]
    grid = ref.reshape(regions._grid(ref))
    zero_rows = (grid == 0).all(dim=1)
    assert zero_rows.any() and not zero_rows.all(), zero_rows  # gaps: some rows, not all
    fixed = regions._constant(judge, task, shape, "float32")[0]
    assert bool(fixed.all(dim=1)[zero_rows].all()), "every gap row is constant under wild draws"
    assert not bool(fixed.all(dim=1)[~zero_rows].any()), "no other row is"
