"""`kernelloop task show --reference-error` (issue 47, "What to build": tolerances): the
task's reference in the judged dtype against itself in float64, at the task's shapes, as
the share of each tolerance it uses (docs/task.md, "Tolerances")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.task import load_task
from kernelloop.task.reference_error import measure

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "t"
    shutil.copytree(
        EXAMPLES / "cpu_task", folder, ignore=shutil.ignore_patterns("candidates", "__pycache__")
    )
    return folder


def test_a_tolerance_tighter_than_pytorch_itself_is_shown(tmp_path):
    folder = _copy(tmp_path)
    task = load_task(folder)
    shape = min(task.spec.cpu_shapes, key=lambda s: s.dims["rows"] * s.dims["cols"])
    rows = measure(task, [shape], ["float32"])
    cases = ["random", *task.spec.suites.extreme_cases]
    assert [r["case"] for r in rows] == cases
    assert all(0 <= r["tol_used"] < 0.05 for r in rows), rows  # fp32 vs fp64: rounding only
    # A careless author's tolerance: 1e-9, tighter than float32 itself computes the op.
    toml = folder / "task.toml"
    old = "float32 = { atol = 1e-5, rtol = 1e-4 }"
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, "float32 = { atol = 1e-9, rtol = 1e-9 }", 1))
    worst = max(r["tol_used"] for r in measure(load_task(folder), [shape], ["float32"]))
    assert worst > 1, worst  # PyTorch's own float32 misses it: every honest kernel would too


@pytest.mark.slow
def test_task_show_prints_and_returns_it(tmp_path):
    folder = _copy(tmp_path)
    shape = "256x1024"
    base = [sys.executable, "-m", "kernelloop", "task", "show", str(folder), "--device", "cpu"]
    args = [*base, "--shapes", shape, "--reference-error"]
    done = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["reference_error"]
    assert {r["shape"] for r in rows} == {shape} and {r["dtype"] for r in rows} == {"float32"}
    text = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    assert "### The reference's own error" in text and "| float32 | 256x1024, " in text, text
