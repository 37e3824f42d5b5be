"""Ctrl-C on a real `kernelloop run` (a real SIGINT, a real sandboxed evaluation, on the
CPU): the first stops it within seconds with its workers ended, the run recorded as
interrupted and the exact `--resume` command printed; that command continues it to the
end and the history says when it was taken up again. Issue 36 measured 2 min 09 s of
silence before this (the launcher waited out the worker's timeout)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.loop.test_kill_resume import (
    FAST,
    KILL_WITHIN_S,
    RESUME_WITHIN_S,
    _descendants,
    _in_flight,
    _killpg,
    _logs,
    _marked,
    _report,
    _rows,
    _settled,
    _start,
    _wall_line,
)
from tests.loop.test_run import _task_copy

STOPPED_WITHIN_S = 5  # issue 36's bound for the first Ctrl-C, workers and records included
WORKERS_GONE_WITHIN_S = 3


def _until_in_flight(proc: subprocess.Popen, folder, log) -> set[int]:
    """Wait until a round-1+ candidate is being evaluated by a settled sandboxed worker of
    this run; return the run's marked workers then."""
    deadline, seen = time.monotonic() + KILL_WITHIN_S, {}
    while True:
        assert proc.poll() is None, f"the run ended before the Ctrl-C\n{_logs(log)}"
        assert time.monotonic() < deadline, f"no evaluation in flight\n{_logs(log)}"
        workers = set(_marked()) & _descendants(proc.pid)
        if _in_flight(folder) and _settled(seen, workers, "kernelloop.evaluate.worker"):
            return workers
        time.sleep(0.1)


def test_first_ctrl_c_stops_the_run_records_it_and_prints_the_resume_command(tmp_path):
    folder = _task_copy(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "kernelloop.cli",
        "run",
        str(folder),
        "--agent",
        f"scripted:{folder / 'scripted'}",
        *FAST,
        "--rounds",
        "2",  # stopped in round 1; the resumed run plays round 2 (a static refusal: quick)
    ]
    log = tmp_path / "first"
    started = time.monotonic()
    first = _start(cmd, log)
    try:
        workers = _until_in_flight(first, folder, log)
        t0 = time.monotonic()
        first.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the launcher
        rc = first.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        _killpg(first)
        first.wait(timeout=30)
    err = log.with_suffix(".err").read_text()
    assert rc == 130, f"rc {rc}\n{_logs(log)}"
    assert took <= STOPPED_WITHIN_S, f"the Ctrl-C took {took:.1f} s to stop the run\n{_logs(log)}"
    deadline = time.monotonic() + WORKERS_GONE_WITHIN_S
    while left := workers & set(_marked()):
        assert time.monotonic() < deadline, f"workers {left} outlived the stopped run"
        time.sleep(0.1)

    # Recorded: the run stays unfinished (for --resume) and let go of, the interruption
    # written against the round it stopped in.
    [run] = _rows(folder, "SELECT * FROM runs")
    assert run["status"] == "running" and run["owner_pid"] is None, dict(run)
    [stop] = _rows(folder, "SELECT * FROM interruptions")
    assert stop["run_id"] == run["id"] and stop["round"] >= 1 and stop["resumed_at"] is None
    assert f"run {run['id']} stopped in round {stop['round']}" in err, err
    # The exact command: this invocation's arguments with --resume added.
    printed = err.split("continue it with: ", 1)[1].strip().splitlines()[0]
    again = shlex.split(printed)
    assert again[1:3] == ["-m", "kernelloop"] and again[3:] == [*cmd[3:], "--resume"], printed

    # That command continues the run to its end; the interruption is closed.
    second = _start([*cmd, "--resume"], tmp_path / "resumed")
    try:
        rc = second.wait(timeout=RESUME_WITHIN_S)
    finally:
        _killpg(second)
        second.wait(timeout=30)
    assert rc == 0, _logs(tmp_path / "resumed")
    [done] = _rows(folder, "SELECT * FROM runs")
    assert done["status"] == "finished", dict(done)
    [stop] = _rows(folder, "SELECT * FROM interruptions")
    assert stop["resumed_at"] and stop["resumed_at"] >= stop["at"], dict(stop)
    # The report's wall time is every stretch the run ran, not only the last (issue 47:
    # 53 s of ~101 s): the first stretch ran from the process's start to the Ctrl-C.
    assert stop["kind"] == "ctrl-c" and 0 < stop["ran_s"] <= t0 + took - started, dict(stop)
    summary = json.loads((folder / ".kernelloop" / f"run-{done['id']}-summary.json").read_text())
    assert summary["wall_s"] == pytest.approx(
        summary["wall_s_last_stretch"] + stop["ran_s"], abs=0.11
    ), summary
    md = _report(folder)
    assert "| Ctrl-C |" in md and _wall_line(md) == pytest.approx(summary["wall_s"], abs=0.6), md


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    """The second SIGINT, sent while the first's cleanup runs, exits 130 there and then."""
    folder = _task_copy(tmp_path)
    cmd = [sys.executable, "-m", "kernelloop.cli", "run", str(folder), *FAST, "--rounds", "1"]
    log = tmp_path / "run"
    proc = _start(cmd, log)
    err = log.with_suffix(".err")
    try:
        deadline = time.monotonic() + KILL_WITHIN_S
        while not (set(_marked()) & _descendants(proc.pid)):  # the baseline's workers
            assert proc.poll() is None and time.monotonic() < deadline, _logs(log)
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        while "stopping: ending the workers" not in err.read_text():  # the first one landed
            assert proc.poll() is None and time.monotonic() < deadline, _logs(log)
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        rc = proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        _killpg(proc)
        proc.wait(timeout=30)
    # 130 either way, never -2 (the handler stays installed until the process ends); where
    # the first's cleanup had already finished and said so, nothing was left to cut short.
    assert rc == 130, _logs(log)
    said = err.read_text()
    finished = "interrupted in round 0" in said or "continue it with: " in said
    assert "interrupted again: exiting now" in said or finished, _logs(log)
    assert took <= 1.0, f"the second Ctrl-C took {took:.1f} s"
