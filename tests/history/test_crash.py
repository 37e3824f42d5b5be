"""SIGKILL a real writer process and check that what it committed survives and resumes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from kernelloop.history import HistoryStore

WRITER = Path(__file__).parent / "crash_writer.py"


def _start(db: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(db), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(proc: subprocess.Popen[str], prefix: str, count: int = 1) -> list[str]:
    seen: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line.strip())
        if line.startswith(prefix):
            count -= 1
            if count == 0:
                return seen
    raise AssertionError(
        f"writer exited before {prefix!r}: {proc.stderr.read() if proc.stderr else ''}"
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_during_an_evaluation_loses_only_that_evaluation_and_resume_finishes(tmp_path):
    db = tmp_path / "history.sqlite"
    proc = _start(db, "rounds")
    lines = _read_until(proc, "IN_FLIGHT")
    _kill(proc)
    in_flight = int(lines[-1].split()[1])
    evaluated = {int(x.split()[1]) for x in lines if x.startswith("EVALUATED")}

    with HistoryStore.open(db) as store:
        state = store.find_resumable_run("softmax")
        assert state is not None
        assert state.completed_rounds == (1, 2, 3)
        assert state.next_round == 4
        assert set(state.evaluated_ids) == evaluated  # every reported evaluation survived
        assert [a.id for a in state.in_flight] == [in_flight]
        best = max((a for a in state.attempts if a.accepted), key=lambda a: a.objective)
        assert state.best_proposal_id == best.id and state.best_objective == best.objective
        assert state.best_source == best.source
        assert state.cost_usd > 0

    proc = _start(db, "resume")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    with HistoryStore.open(db) as store:
        assert store.find_resumable_run("softmax") is None  # finished
        attempts = store.attempts("softmax")
        # rounds 1-5 with two proposals each plus the baseline, each evaluated exactly once
        assert sorted((a.round, a.k) for a in attempts) == [(0, 1)] + [
            (r, k) for r in range(1, 6) for k in (1, 2)
        ]
        assert all(a.evaluated for a in attempts)
        assert {a.id for a in attempts} >= evaluated | {in_flight}
        assert store.runs("softmax")[0].status == "finished"


def test_sigkill_in_a_tight_write_loop_keeps_every_reported_write_and_a_sound_file(tmp_path):
    db = tmp_path / "history.sqlite"
    proc = _start(db, "stream")
    lines = _read_until(proc, "EVALUATED", count=25)
    _kill(proc)  # lands somewhere in the middle of the next writes
    reported = {int(x.split()[1]) for x in lines if x.startswith("EVALUATED")}

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with HistoryStore.open(db) as store:
        state = store.find_resumable_run("softmax")
        assert state is not None
        assert reported <= set(state.evaluated_ids)
        # at most the one proposal whose evaluation was in flight is missing its result
        assert len(state.in_flight) <= 1
        assert all(a.objective == 1.0 for a in state.attempts)
