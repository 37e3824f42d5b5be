"""Issue 46 item 6: a scan the Triton interpreter runs in order (tl.cumsum, tl.cumprod,
tl.associative_scan) is judged on the CPU without a GPU's parallel order of rounding and
overflow; the CPU verdict says so rather than letting "judged correct" stand alone (a
cumprod scan bug that overflows on the GPU passed the interpreter)."""

from __future__ import annotations

from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.run_record import interpreter_note
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem
from tests.conftest import ROOT

KB = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench_shared"
CUMSUM = ROOT / "benchmarks" / "kernelbench_solutions" / "level1_89_cumsum" / "cumsum.py"


def test_the_note_names_the_sequential_scans_only():
    assert interpreter_note(b"x = tl.sum(a, axis=0)\ny = tl.max(a, 0)\n") == []
    [said] = interpreter_note(b"c = tl.cumsum(a, axis=1)\nd = tl.associative_scan(a, 0, f)\n")
    assert "tl.associative_scan, tl.cumsum in order" in said and "judge it on a GPU" in said


def test_a_cpu_verdict_on_a_scan_kernel_carries_the_warning(tmp_path):
    task = load_task(import_problem(KB / "level1" / "89_cumsum.py", tmp_path, ["float32"]))
    rec = evaluate(task, CUMSUM, device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    assert any("Triton's interpreter, which runs tl.cumsum" in w for w in rec.warnings)
    base = evaluate(task, task.baseline_path, device="cpu", timing=False)
    assert not any("interpreter, which runs" in w for w in base.warnings)
