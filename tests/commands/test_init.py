"""`kernelloop init` writes a skeleton for a new op — valid as written, TODOs to replace, no
flagship leftovers — whose baseline passes its own checks; `--like TASK` copies a task
without its history (issue 36: init copied the flagship, dropout and description)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLAGSHIP_WORDS = ("dropout", "softmax", "layernorm", "layer_norm", "ln_softmax", "keep_mask")


def _init(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop", "init", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_init_writes_a_skeleton_that_task_show_and_evaluate_accept(tmp_path):
    done = _init(tmp_path, "my op")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "my op"
    assert "task show" in done.stdout and "evaluate" in done.stdout, done.stdout
    task = load_task(folder)
    assert task.name == "my_op"
    text = {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}
    assert set(text) == {"task.toml", "reference.py", "inputs.py", "baseline.py"}
    for name, body in text.items():
        assert "TODO" in body, name
        found = [w for w in FLAGSHIP_WORDS if w in body.lower()]
        assert not found, (name, found)
    shown = subprocess.run(
        [sys.executable, "-m", "kernelloop", "task", "show", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0 and "`x`: shape (rows, cols)" in shown.stdout, shown.stderr
    rec = evaluate(task, task.baseline_path, device="cpu", timing=False, shapes="3x257")
    assert rec.verdict.accepted, rec.verdict.reasons


def test_init_like_copies_a_task_under_the_new_name_without_its_history(tmp_path):
    src = tmp_path / "src"
    assert _init(tmp_path, "src", "--like", str(EXAMPLES / "cpu_task")).returncode == 0
    (src / ".kernelloop").mkdir()  # a history the copy must not take
    done = _init(tmp_path, "copy", "--like", str(src))
    assert done.returncode == 0, done.stderr
    copy = load_task(tmp_path / "copy")
    assert copy.name == "copy" and load_task(src).name == "src"
    assert not (tmp_path / "copy" / ".kernelloop").exists()
    assert (tmp_path / "copy" / "reference.py").read_text() == (
        EXAMPLES / "cpu_task" / "reference.py"
    ).read_text()
    assert _init(tmp_path, "copy", "--like", str(src)).returncode == 2  # exists: refused
