"""The `[e2e]` check's `model_margin` (task/model_error.py, issue 33 finding 5): the model
built on the task's own reference in the judged dtype is run on the trusted side on each
e2e call's inputs; where it misses the e2e tolerance by itself, the miss is the task's, and
a candidate is held to the margin times that model's error. On the CPU task (plain
PyTorch, fast) with an e2e tolerance its own float32 model cannot meet (atol 1e-7: the
model's matmuls alone are ~3e-6 off), the honest baseline is accepted and a candidate that
drifts (3.5e-3 off: tests/evaluate/e2e_candidates/biased.py) is still rejected."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[2]
BIASED = Path(__file__).parent / "e2e_candidates" / "biased.py"
ONE = {"device": "cpu", "shapes": "256x1024", "timing": False, "workers": 1}
GIVEN = "tolerances = { float32 = { atol = 2e-5, rtol = 1e-4 } }"
STRICT = "tolerances = { float32 = { atol = 1e-7, rtol = 0.0, model_margin = 8 } }"


def test_an_e2e_tolerance_the_model_itself_misses_rejects_only_the_drifting_candidate(tmp_path):
    folder = tmp_path / "cpu_task"
    shutil.copytree(ROOT / "examples" / "cpu_task", folder)
    toml = folder / "task.toml"
    assert GIVEN in toml.read_text()
    toml.write_text(toml.read_text().replace(GIVEN, STRICT))
    task = load_task(folder)
    rec = evaluate(task, task.baseline_path, **ONE)
    assert rec.verdict.accepted, rec.verdict.reasons
    (e2e,) = [c for c in rec.checks if c.suite == "e2e"]
    assert e2e.passed and e2e.max_abs_err > 1e-7  # past the tolerance as written
    assert "misses its tolerance atol 1e-07" in e2e.reason, e2e.reason
    assert "the task's doing, not the candidate's" in e2e.reason, e2e.reason
    drift = evaluate(task, BIASED, **ONE)
    assert drift.verdict.category == "e2e", drift.verdict.reasons
    assert "held to 8x that model's error" in drift.verdict.reasons[0]
