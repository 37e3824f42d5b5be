"""The command line follows the conventions people expect (issue 36): --version, -h,
flags shown without a value, one name for the task argument, exit codes in help, bounded
numbers, bad candidate files and unknown task.toml fields refused in one sentence, task
text never eaten as rich markup, and help or usage errors cheap (CPU time, so a loaded
machine does not change the verdict)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelloop.errors import TaskError
from kernelloop.task import load_task
from tests import busy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"
COMMANDS = ["init", "evaluate", "run", "bench", "profile", "history", "report", "suite", "mcp"]
HELP_CPU_S = 2.0
HELP_WALL_S = 2.0  # issue 36: --help and usage errors in <= 2 s


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin", "TERM": "dumb"},
    )


def _cpu_s(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = _cli(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def test_version_and_short_help():
    done = _cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("kernelloop "), done
    for args in (["-h"], ["run", "-h"], ["evaluate", "-h"]):
        done = _cli(*args)
        assert done.returncode == 0 and "[OPTIONS]" in done.stdout, (args, done)


def test_help_shows_flags_bare_one_task_name_and_exit_codes():
    root = _cli("--help").stdout
    assert "2 usage or setup error" in root and "130 interrupted" in root, root
    for cmd in COMMANDS:
        text = _cli(cmd, "--help").stdout
        assert "<bool>" not in text, (cmd, text)
        assert "task_dir" not in text and "{task}" not in text, (cmd, text)
    assert "2 not judged: a usage or setup error" in " ".join(
        _cli("evaluate", "--help").stdout.split()
    )
    assert "130 interrupted" in _cli("run", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["run", str(EXAMPLE), "--rounds", "-1"],
        ["run", str(EXAMPLE), "--candidates", "0"],
        ["evaluate", str(EXAMPLE), str(EXAMPLE / "baseline.py"), "--timeout", "0"],
        ["evaluate", str(EXAMPLE), str(EXAMPLE / "baseline.py"), "--workers", "0"],
        ["suite", str(EXAMPLE), "--rounds", "0"],
    ],
)
def test_numeric_flags_are_bounded(args):
    done = _cli(*args)
    assert done.returncode == 2 and "Invalid value" in done.stderr, done


# Every subcommand's help and a usage error of each kind, including the ones that once
# imported torch or matplotlib before checking their arguments (suite with no task 4.2 s,
# evaluate with a missing candidate 2.7 s, task show of a missing folder 2.7 s, measured
# 2026-12-03 on the 2-core CPU; ~1 s each since).
CHEAP = [
    ["--help"],
    ["run", "--help"],
    ["bench", "-h"],
    ["task", "show", "--help"],
    ["run", "--rounds", "x", "t"],  # a bad flag value
    ["evaluate", str(EXAMPLE)],  # a missing argument
    ["evaluate", str(EXAMPLE), "missing.py"],
    ["task", "show", "no-such-task"],
    ["suite"],
    ["report"],
]


def _wall_and_cpu(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    cpu, done = _cpu_s(*args)
    return time.monotonic() - t0, cpu, done


@pytest.mark.parametrize("args", CHEAP, ids=" ".join)
def test_help_and_usage_errors_take_under_two_seconds(args):
    """CPU time is asserted on every try (a loaded machine does not inflate it); wall time,
    what the user waits, is measured again after the load falls (tests/busy.py) and the
    test is skipped, saying so, if the machine never got quiet enough to tell."""
    for attempt in range(busy.TRIES):
        if attempt:
            busy.wait_for_quiet()
        wall, cpu, done = _wall_and_cpu(args)
        assert done.returncode in (0, 2), done
        assert done.returncode == 0 or "Traceback" not in done.stderr, done.stderr
        assert cpu <= HELP_CPU_S, f"{args}: {cpu:.2f} s of CPU (imports at start-up?)"
        if wall <= HELP_WALL_S:
            return
    load = os.getloadavg()[0]
    if load < (os.cpu_count() or 1):
        pytest.fail(f"{args}: {wall:.2f} s wall on a quiet machine (load {load:.1f})")
    pytest.skip(f"{args}: {wall:.2f} s wall with load {load:.1f}: too busy to tell the wall time")


def test_bad_candidate_files_are_refused_in_one_sentence(tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * (2 << 20))
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\n")
    cases = {
        tmp_path: "is a directory; pass one source file",
        big: "MB, over the 1024 KB limit",
        latin: "is not UTF-8 text",
        tmp_path / "missing.py": "does not exist",
    }
    for path, said in cases.items():
        done = _cli("evaluate", str(EXAMPLE), str(path))
        assert done.returncode == 2, done
        assert said in done.stderr and done.stderr.count("\n") <= 2, done.stderr


def test_an_unknown_field_gets_its_name_and_a_suggestion_unmangled(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("min_gain =", "min_gian =", 1))
    with pytest.raises(TaskError, match=r"unknown field 'min_gian' in \[rules\]; did you mean "):
        load_task(folder)
    done = _cli("task", "show", str(folder))
    assert done.returncode == 2, done
    # "[rules]" survives the console (rich would read it as a style tag and drop it).
    assert "unknown field 'min_gian' in [rules]; did you mean 'min_gain'?" in " ".join(
        done.stderr.split()
    ), done.stderr
