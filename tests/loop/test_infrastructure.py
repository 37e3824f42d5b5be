"""An infrastructure failure is not the candidate's fault: the round retries it once,
records a second one as `infrastructure` (never a verdict, never a tried idea), and an
identical resubmission after it is evaluated, not refused as a duplicate.

The workers here are real sandboxed subprocesses of the flagship task (Triton
interpreter, one small CPU shape); "from outside" is this test killing the evaluation's
worker with SIGKILL, as the OOM killer would, and the sandbox that cannot start is a
`SandboxError` raised where `evaluate` would start it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from kernelloop.agents.scripted import ScriptedAgent
from kernelloop.errors import SandboxError
from kernelloop.gate import GateResult
from kernelloop.history import open_task_memory
from kernelloop.history.models import history_row
from kernelloop.loop import Options, run_loop
from kernelloop.loop import evaluation as loop_evaluation
from kernelloop.loop.session import ExternalSession
from kernelloop.loop.state import Evaluated
from kernelloop.loop.view import RunView
from kernelloop.task import load_task
from tests.bench.records import record as bench_record
from tests.bench.records import uniform
from tests.conftest import FUSED
from tests.history.records import make_record
from tests.loop.test_kill_resume import _descendants, _marked
from tests.loop.test_run import FAST, _task_copy, _write_candidates

FEWER_WARPS = FUSED.read_text().replace("NUM_WARPS = 8", "NUM_WARPS = 4")
KILLED = "the worker died with exit code -9 (killed by SIGKILL)"


@pytest.mark.parametrize(
    ("category", "reasons", "infrastructure"),
    [
        ("crash", [KILLED, "12 planned call(s) produced no result, e.g. c0"], True),
        ("crash", ["the worker died with exit code 137 (non-zero exit)"], True),  # bwrap's report
        ("crash", ["the worker died with exit code 1 (non-zero exit)"], False),
        ("crash", ["the worker died with exit code -11 (killed by SIGSEGV)"], False),
        ("timeout", ["the worker exceeded its 600 s wall-clock limit and was killed"], False),
        # The verdict's category is the candidate's first failure: wrong, then killed.
        ("wrong", ["7x129 float32 normal: max rel err 0.9", KILLED], False),
    ],
)
def test_the_rule_for_a_correctness_worker(category, reasons, infrastructure):
    ev = Evaluated(make_record(False, category, tuple(reasons)))
    fault = loop_evaluation.infrastructure_fault(ev)
    assert bool(fault) is infrastructure, fault
    assert not fault or "killed from outside" in fault


def test_a_failure_of_the_trusted_side_is_infrastructure():
    # judge.Judge.internal_error's category: evaluated again, never charged to the candidate
    why = "random/random 7x129 float32: the trusted side failed judging this call (KeyError)"
    ev = Evaluated(make_record(False, "internal", (why,)))
    assert loop_evaluation.infrastructure_fault(ev) == why


def test_the_rule_for_a_benchmark_worker():
    killed = bench_record(uniform(0.5), problems=["the benchmark worker died with exit code -9"])
    ended = bench_record(uniform(0.5), problems=["the benchmark worker died with exit code 1"])
    gate = GateResult(accepted=False, category="timing", reasons=["killed"])
    assert "benchmark" in loop_evaluation.infrastructure_fault(
        Evaluated(make_record(), killed, gate)
    )
    assert loop_evaluation.infrastructure_fault(Evaluated(make_record(), ended, gate)) == ""
    busy = "256x1024: the machine was too busy to time on: batches in which ..."
    wrong = "256x1024: the timed output differs from the reference (candidate: ...)"
    assert "busy machine" in loop_evaluation.infrastructure_fault(
        Evaluated(make_record(), bench_record(uniform(0.5), problems=[busy]), gate)
    )
    # Anything else found against the candidate stands: it is not retried as bad luck.
    assert (
        loop_evaluation.infrastructure_fault(
            Evaluated(make_record(), bench_record(uniform(0.5), problems=[wrong, busy]), gate)
        )
        == ""
    )
    crowded = bench_record(
        uniform(0.5),
        problems=["256x1024: the candidate's worker waited for a CPU in 5 of 5 batches while"],
    )
    assert loop_evaluation.infrastructure_fault(Evaluated(make_record(), crowded, gate)) == ""
    # bench's own infrastructure (a trusted slot out of memory, the memory plan's refusal:
    # gate category `internal`) is never the candidate's.
    room = "memory: one call of shape 256x1024 needs about 9.00 GiB (...): infrastructure"
    internal = GateResult(accepted=False, category="internal", reasons=[room])
    no_room = bench_record(uniform(0.5), infrastructure=[room])
    assert loop_evaluation.infrastructure_fault(Evaluated(make_record(), no_room, internal)) == room
    fine = bench_record(uniform(0.5))
    slower = GateResult(accepted=False, category="slower")
    assert loop_evaluation.infrastructure_fault(Evaluated(make_record(), fine, slower)) == ""


def _kill_our_workers(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL every sandboxed process of this test process until told to stop."""
    me = os.getpid()
    while not stop.is_set():
        for pid in set(_marked()) & _descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _interfere(monkeypatch, plan: dict[str, list[str]]) -> Counter:
    """Wrap the round's `evaluate`: the n-th evaluation of candidate NAME has its worker
    killed ("kill") or its sandbox fail to start ("sandbox") as plan[NAME][n] says; every
    other evaluation runs untouched."""
    real, calls = loop_evaluation.evaluate, Counter()

    def evaluate(task, path, **kw):
        name = Path(path).stem
        calls[name] += 1
        todo = plan.get(name, [])
        what = todo[calls[name] - 1] if calls[name] <= len(todo) else None
        if what == "sandbox":
            raise SandboxError("bubblewrap could not set up the user namespace (test)")
        if what != "kill":
            return real(task, path, **kw)
        stop, killed = threading.Event(), []
        killer = threading.Thread(target=_kill_our_workers, args=(stop, killed))
        killer.start()
        try:
            return real(task, path, **kw)
        finally:
            stop.set()
            killer.join()
            assert killed, f"{name}: no sandboxed worker showed up to be killed"

    monkeypatch.setattr(loop_evaluation, "evaluate", evaluate)
    return calls


def test_a_worker_killed_from_outside_is_retried_then_recorded_as_infrastructure(
    tmp_path, monkeypatch
):
    folder = _task_copy(tmp_path)
    cands = _write_candidates(tmp_path / "cands", {
        "01_fused": (FUSED.read_text(), "Fuse the three kernels into one row kernel."),
        "02_warps": (FEWER_WARPS, "Fused, with 4 warps per row instead of 8."),
        "03_warps_again": (FEWER_WARPS, "Fused, with 4 warps per row instead of 8."),
    })  # fmt: skip
    calls = _interfere(monkeypatch, {"r1_1": ["kill"], "r2_1": ["kill", "kill"]})
    task = load_task(folder)
    summary = run_loop(task, ScriptedAgent(cands), Options(device="cpu", **FAST),
                       RunView(live_enabled=False))  # fmt: skip

    assert summary["status"] == "finished"
    assert (calls["r1_1"], calls["r2_1"], calls["r3_1"]) == (2, 2, 1)
    store, _ = open_task_memory(task)
    with store:
        fused, lost, again = (store.attempt(row["id"]) for row in summary["attempts"])
        # Killed once: the retry is a whole fresh evaluation, and its verdict stands.
        assert (fused.status, fused.category) == ("evaluated", "accepted"), fused
        warnings = json.loads(store.record_json(fused.id))["warnings"]
        assert any("evaluated a second time" in w and "killed from outside" in w for w in warnings)
        # Killed twice: an infrastructure row, with no evaluation and no verdict.
        assert (lost.status, lost.accepted, lost.was_best) == ("infrastructure", None, False)
        assert (
            lost.infra_reason.startswith("twice: ") and "killed from outside" in lost.infra_reason
        )
        assert "SIGKILL" in lost.infra_reason or "137" in lost.infra_reason, lost.infra_reason
        assert store.record_json(lost.id) is None
        # The identical resubmission is evaluated, not refused as a repeat.
        assert again.refused_reason == "" and again.status == "evaluated", again.refused_reason
        assert again.category == "accepted"
        row = history_row(lost)
    assert row["status"] == "infrastructure" and row["infra_reason"] == lost.infra_reason
    assert [a["status"] for a in summary["attempts"]] == [
        "evaluated",
        "infrastructure",
        "evaluated",
    ]


def test_the_mcp_session_records_a_sandbox_that_could_not_start_and_takes_the_resend(
    tmp_path, monkeypatch
):
    """The same round function behind `kernelloop mcp`: a sandbox that fails twice gives
    an `infrastructure` verdict, and the identical resubmission (whose sandbox fails once)
    is evaluated on the retry."""
    folder = _task_copy(tmp_path)
    calls = _interfere(monkeypatch, {"r1_1": ["sandbox", "sandbox"], "r2_1": ["sandbox"]})
    session = ExternalSession(load_task(folder), Options(device="cpu", rounds=3, **FAST))
    claim, fused = "Fuse the three kernels into one, one row per program.", FUSED.read_text()
    try:
        lost = session.submit(fused, claim, "1.3x")
        resent = session.submit(fused, claim, "1.3x")
        history = session.history()
    finally:
        session.close()
    assert (calls["r1_1"], calls["r2_1"]) == (2, 2)
    assert (
        lost["verdict"] == "not evaluated"
        and lost["status"] == "infrastructure"
        and lost["accepted"] is None
    ), lost
    assert "sandbox could not start" in lost["infra_reason"] and lost["new_best"] is False
    assert "not the candidate's fault" in lost["outcome"] and "may be sent again" in lost["outcome"]
    assert resent["verdict"] == "judged correct, not timed" and resent["refused_reason"] == "", (
        resent
    )
    assert resent["run"]["rounds_used"] == 2
    assert [a["status"] for a in history["attempts"]] == [
        "evaluated",
        "infrastructure",
        "evaluated",
    ]
    assert "infrastructure" in history["digest"]
    store, _ = open_task_memory(load_task(folder))
    with store:
        warnings = json.loads(store.record_json(resent["id"]))["warnings"]
    assert any("sandbox could not start" in w for w in warnings), warnings
