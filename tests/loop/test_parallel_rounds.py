"""A round's candidates judged at once (issue #17): `--jobs 2` on the CPU gives the verdicts
judging in turn gives, the checks of two candidates overlap while every timing has the CPU
alone, and a run SIGKILLed with two evaluations in flight resumes with nothing lost and
nothing recorded twice.

Real parts: sandboxed evaluations (the flagship under Triton's interpreter, the CPU-native
task's real CPU timings), the `kernelloop` CLI in a subprocess for the kill, SQLite
histories and git repositories in temp dirs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kernelloop.agents.scripted import ScriptedAgent
from kernelloop.evaluate.trusted.bench import PendingBenchmark
from kernelloop.executor import InTurn
from kernelloop.executor.local import LocalJobs
from kernelloop.loop import Options, run_loop
from kernelloop.loop import evaluation as loop_evaluation
from kernelloop.loop.view import RunView
from kernelloop.task import load_task
from tests.loop.test_kill_resume import (
    _cmdline,
    _decided,
    _descendants,
    _in_flight,
    _killpg,
    _logs,
    _marked,
    _rows,
    _start,
)
from tests.loop.test_rounds import FAST_, ONE, SLOW, _check_round_one_once, measured_round
from tests.loop.test_run import FAST, _task_copy

# The flagship's scripted ideas, all four proposed in one round (tests/loop/test_run.py
# has their verdicts one a round): the fused kernel and the Philox-per-4 kernel correct,
# the PyTorch shortcut refused by the screen or at run time, the one-pass variance wrong.
FOUR = ["01_fused_naive", "02_torch_shortcut", "03_one_pass_variance", "04_fused_philox4"]
SHORTCUT = {"static", "no_kernel"}


def four_in_one_round(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the flagship and a scripted folder holding its first four ideas."""
    folder = _task_copy(tmp_path)
    script = tmp_path / "four"
    script.mkdir()
    for name in FOUR:
        for ext in (".py", ".toml"):
            src = folder / "scripted" / f"{name}{ext}"
            (script / src.name).write_text(src.read_text())
    return folder, script


def verdicts(folder: Path) -> list[tuple[int, int, str, str]]:
    """(round, k, status, category) of every proposal, in the order proposed."""
    rows = _rows(
        folder,
        "SELECT p.round, p.k, p.status, e.category FROM proposals p "
        "LEFT JOIN evaluations e ON e.proposal_id = p.id ORDER BY p.round, p.k, p.id",
    )
    return [(r["round"], r["k"], r["status"], r["category"] or "") for r in rows]


def check_four(got: list[tuple[int, int, str, str]]) -> None:
    """The verdicts of the four ideas judged in one round (whoever judged them)."""
    assert [g[:3] for g in got] == [(0, 1, "evaluated")] + [
        (1, k, "evaluated") for k in (1, 2, 3, 4)
    ]
    cats = [g[3] for g in got]
    assert cats[0] == cats[1] == cats[4] == "accepted", got
    assert cats[2] in SHORTCUT and cats[3] == "wrong", got


def test_jobs_2_judges_the_interpreter_round_as_in_turn(tmp_path):
    results = {}
    for label, executor in (("in turn", InTurn()), ("jobs 2", LocalJobs(2))):
        folder, script = four_in_one_round(tmp_path / label.replace(" ", "_"))
        try:
            run_loop(
                load_task(folder),
                ScriptedAgent(script, per_round=4),
                Options(device="cpu", rounds=1, executor=executor, **FAST),
                RunView(live_enabled=False),
            )
        finally:
            executor.close()
        results[label] = verdicts(folder)
    check_four(results["in turn"])
    # The same verdicts, category by category (the shortcut may be caught either way).
    assert results["jobs 2"] == results["in turn"]


class Spans:
    """Wraps the real evaluate() and benchmark() of the loop's jobs and logs when each ran."""

    def __init__(self, monkeypatch) -> None:
        self.log: list[tuple[str, str, float, float]] = []
        self._lock = threading.Lock()
        monkeypatch.setattr(
            loop_evaluation, "evaluate", self._wrap("evaluate", loop_evaluation.evaluate)
        )
        # The benchmark's timing is its `run` (its workers may start before it, untimed).
        real_run = PendingBenchmark.run
        monkeypatch.setattr(
            PendingBenchmark,
            "run",
            lambda pending: self._wrap("benchmark", lambda _t, _p: real_run(pending))(
                pending.task, pending.candidate
            ),
        )

    def _wrap(self, kind: str, real):
        def timed(task, path, **kw):
            t0 = time.monotonic()
            try:
                return real(task, path, **kw)
            finally:
                with self._lock:
                    self.log.append((kind, Path(path).stem, t0, time.monotonic()))

        return timed

    def of(self, kind: str, stem: str) -> tuple[float, float]:
        [(start, end)] = [(s, e) for k, n, s, e in self.log if k == kind and n == stem]
        return start, end


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_jobs_2_checks_together_times_alone_and_promotes_as_in_turn(tmp_path, monkeypatch):
    """The CPU-native task (its CPU timings count): the round of a slow and a fast
    candidate ends as in turn (tests/loop/test_rounds.py), the two correctness checks ran
    at the same time, and no timing overlapped any other evaluation's work."""
    spans = Spans(monkeypatch)

    def run(task, script):
        spans.log.clear()  # this try's spans only
        executor = LocalJobs(2)
        try:
            opts = Options(device="cpu", shapes=ONE, rounds=1, executor=executor)
            return run_loop(
                task, ScriptedAgent(script, per_round=2), opts, RunView(live_enabled=False)
            )
        finally:
            executor.close()

    task, summary = measured_round(tmp_path, [SLOW, FAST_], run)
    _check_round_one_once(task, summary)
    assert _overlap(spans.of("evaluate", "r1_1"), spans.of("evaluate", "r1_2")), spans.log
    benches = [(s, e) for k, n, s, e in spans.log if k == "benchmark" and n.startswith("r1_")]
    assert len(benches) == 2, spans.log  # both correct, both timed against the baseline
    for b in benches:
        others = [(s, e) for _, _, s, e in spans.log if (s, e) != b]
        assert not any(_overlap(b, o) for o in others), (b, spans.log)


KILL_WITHIN_S = 300
RESUME_WITHIN_S = 300


def _workers_up(root: int, seen: dict[int, float]) -> int:
    """How many of root's sandboxed evaluation workers have been up for 0.5 s or more."""
    now = time.monotonic()
    up = {
        pid
        for pid in set(_marked()) & _descendants(root)
        if "kernelloop.evaluate.worker" in _cmdline(pid)
    }
    for pid in list(seen):
        if pid not in up:
            del seen[pid]
    for pid in up:
        seen.setdefault(pid, now)
    return sum(now - t >= 0.5 for t in seen.values())


def test_sigkill_with_two_evaluations_in_flight_then_resume_records_each_once(tmp_path):
    folder, script = four_in_one_round(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "kernelloop.cli",
        "run",
        str(folder),
        "--agent",
        f"scripted:{script}",
        "--candidates",
        "4",
        "--jobs",
        "2",
        "--rounds",
        "1",
        "--device",
        "cpu",
        "--shapes",
        FAST["shapes"],
        "--dtypes",
        "float32",
    ]
    first = _start(cmd, tmp_path / "killed")
    try:
        deadline, seen = time.monotonic() + KILL_WITHIN_S, {}
        while True:
            assert first.poll() is None, f"the run ended first\n{_logs(tmp_path / 'killed')}"
            assert time.monotonic() < deadline, (
                f"never two evaluations in flight within {KILL_WITHIN_S} s "
                f"(verdicts: {_decided(folder)})\n{_logs(tmp_path / 'killed')}"
            )
            # Two candidates of round 1 versioned and in their sandboxes at once.
            if len(_in_flight(folder)) >= 2 and _workers_up(first.pid, seen) >= 2:
                break
            time.sleep(0.1)
        os.killpg(first.pid, signal.SIGSTOP)  # freeze: no verdict lands between census and kill
        before = {
            r["id"]: r["status"]
            for r in _rows(folder, "SELECT id, status FROM proposals WHERE round >= 1")
        }
        lost = {r["id"] for r in _in_flight(folder)}
        os.killpg(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        _killpg(first)
        first.wait(timeout=30)
    assert len(lost) >= 2 and len(before) == 4, before  # all four recorded before judging

    second = _start([*cmd, "--resume"], tmp_path / "resumed")
    try:
        rc = second.wait(timeout=RESUME_WITHIN_S)
    except subprocess.TimeoutExpired:
        rc = f"still running after {RESUME_WITHIN_S} s"
    finally:
        _killpg(second)
        second.wait(timeout=30)
    assert rc == 0, f"--resume: {rc}\n{_logs(tmp_path / 'resumed')}"

    [run] = _rows(folder, "SELECT * FROM runs")
    assert run["status"] == "finished"
    counts = _rows(
        folder,
        "SELECT p.id, p.status, (SELECT COUNT(*) FROM evaluations e WHERE e.proposal_id = p.id) "
        "AS n FROM proposals p WHERE p.round >= 1 ORDER BY p.id",
    )
    # The same four rows (none added by the resume), each with exactly one verdict; what
    # had one before the kill kept it.
    assert [c["id"] for c in counts] == sorted(before)
    assert all(c["n"] == 1 and c["status"] == "evaluated" for c in counts), [
        dict(c) for c in counts
    ]
    for c in counts:
        if before[c["id"]] != "proposed":
            assert c["status"] == before[c["id"]]
    check_four(verdicts(folder))
