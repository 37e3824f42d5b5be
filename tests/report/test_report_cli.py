"""`kernelloop report` through a real subprocess: where it writes, and its errors."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.loop.test_measured_cpu import CPU_TASK


def _cli(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "report", *map(str, args)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )


def test_report_command_writes_where_it_says(measured_run, run_copy, tmp_path):
    folder, _ = run_copy
    run_id = measured_run[1]["run_id"]
    out = tmp_path / "review"
    done = _cli(folder, "--out", out)
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} written to {out.resolve()}" in done.stdout
    assert all((out / name).is_file() for name in ("report.html", "report.md", "progress.png"))
    assert (
        str(out.resolve() / "report.html") in done.stdout and "charts: progress.png" in done.stdout
    )

    default = _cli(folder)  # beside the history, one folder per run
    assert default.returncode == 0, default.stderr
    expected = folder.resolve() / ".kernelloop" / "reports" / f"run-{run_id}"
    assert (expected / "report.html").is_file() and str(expected) in default.stdout


def test_report_command_errors_are_one_sentence_with_the_fix(run_copy, tmp_path):
    fresh = tmp_path / "fresh"
    shutil.copytree(CPU_TASK, fresh, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    done = _cli(fresh)
    assert done.returncode == 2
    assert (
        "no history for task cpu_rmsnorm_residual" in done.stderr
        and "kernelloop run" in done.stderr
    )
    assert "Traceback" not in done.stderr

    folder, _ = run_copy
    done = _cli(folder, "--run", "99")
    assert done.returncode == 2 and "has no run 99; pick one of 1" in done.stderr, done.stderr
    (tmp_path / "afile").write_text("x")
    done = _cli(folder, "--out", tmp_path / "afile")
    assert done.returncode == 2 and "is a file, not a folder" in done.stderr, done.stderr
    assert not list(Path(folder / ".kernelloop").glob("reports/run-99"))
