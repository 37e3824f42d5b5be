"""`kernelloop history` at 80 columns (issue 47, item 11): it split its headers and
verdicts ("accept… ★") and dropped a run's fourth shape without a word. Through the real
CLI, in a subprocess, with COLUMNS=80."""

from __future__ import annotations

import os
import subprocess
import sys

from records import make_record
from test_cli import RUNNER, simulate_run

from kernelloop.history import HistoryStore, history_path


def _at_80(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, str(RUNNER), *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_history_at_80_columns_cuts_no_word_and_drops_no_shape(task_dir):
    ids = simulate_run(task_dir)
    four = {"4096x8000": 1.3, "1024x32768": 1.1, "2048x2048": 0.9, "128x128": 1.02}
    with HistoryStore.open(history_path(task_dir)) as store:
        run = store.start_run("softmax", "d", agent="llm", device_name="NVIDIA H200", arch="sm_90")
        pid = store.add_proposal(
            run, 1, source="x = 1\n", hypothesis="four shapes", parent_id=ids["base"], agent="llm"
        )
        store.add_evaluation(pid, make_record(True, "accepted", (), four), objective=1.07,
                             per_shape=four)  # fmt: skip
    out = _at_80("history", str(task_dir))
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80, out.stdout
    for shape in four:  # every shape of the run with four, with its change
        assert f"{shape} " in out.stdout, out.stdout
    for header in ("ID", "run", "round", "Verdict", "Objective", "Per-shape change", "Cost"):
        assert header in out.stdout, out.stdout  # two runs shown: the run stays, its line
    # Whole verdict words, wrapped at a space, never cut.
    assert "promoted ★" in out.stdout and "[slower]" in out.stdout, out.stdout
    one = _at_80("history", str(task_dir), "--run", str(run))
    assert "kernelloop history: softmax, run 2" in one.stdout, one.stdout  # the column's note
