"""Red team, issue 12: timing out of the candidate's reach (CPU, real sandboxed workers).

The CPU-native task (plain PyTorch, language = "torch") is used because its CPU timings
count: the gate judges them, so a cheat that moved them would be accepted. Every test runs
the hostile candidate with the static screen bypassed and asserts the rejection with its
reason, the canary intact and no process left behind; (a) and (d) also show that the best,
timed in its own worker, is as fast as beside an honest candidate in the same layout.
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.gate import performance_gate
from kernelloop.task import load_task
from tests.busy import measured
from tests.redteam.harness import processes_with, write_candidate

ROOT = Path(__file__).resolve().parents[2]
CPU_TASK = ROOT / "examples" / "cpu_task"
FAST = CPU_TASK / "candidates" / "fast.py"
SHAPE = "256x1024"


@pytest.fixture(scope="module")
def task():
    return load_task(CPU_TASK)


@pytest.fixture(scope="module")
def best(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("best") / "fast_best.py"
    shutil.copyfile(FAST, path)
    return path


def _bench(task, candidate: Path, best: Path, **kw):
    """The benchmark, measured again while its only problems are a busy machine (BUSY,
    tests/busy.py) and skipped if the machine stays so: a refusal to time proves nothing
    about a cheat, and the cheat must be caught by what it did, where the clock can see."""
    return measured(
        lambda: benchmark(
            task,
            candidate,
            best=best,
            device="cpu",
            shapes=SHAPE,
            max_s_per_shape=0.5,
            screen=False,
            **kw,
        ),
        lambda r: r.problems,
        f"red team ({candidate.name})",
    )


@pytest.fixture(scope="module")
def honest(task, best, tmp_path_factory):
    """The same layout with an honest candidate (another copy of the best)."""
    cand = tmp_path_factory.mktemp("honest") / "fast_candidate.py"
    shutil.copyfile(FAST, cand)
    rec = _bench(task, cand, best, aa=False)
    assert rec.problems == [], rec.problems
    return rec


def _median(rec, slot: str) -> float:
    return rec.shapes[0].impls[slot].median_ms


def test_a_patching_torch_and_the_best_in_its_own_process_does_not_slow_the_best(
    task, best, honest, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_slow_the_best.py", CANARY=str(canary.path))
    rec = _bench(task, cheat, best, aa=False)
    assert rec.problems == [], rec.problems
    # In one process its patches would add >= 6 ms to every call of the best (~0.1-1 ms).
    assert _median(rec, "best") < 2.0 * _median(honest, "best") + 0.2, (
        _median(rec, "best"),
        _median(honest, "best"),
    )
    assert _median(rec, "baseline") < 2.0 * _median(honest, "baseline") + 0.5
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted and gate.category == "slower", (
        gate.reasons
    )  # its own speed is the best's: no gain
    assert canary.intact()


@pytest.mark.parametrize(
    "name, phrase",
    [
        ("timing_knows_it_is_timed.py", "the timed output differs from the reference (candidate:"),
    ],
)
def test_b_a_wrong_result_only_while_timed_is_caught_by_the_trusted_reference(
    task, best, tmp_path, canary, name, phrase
):
    cheat = write_candidate(tmp_path, name)
    rec = _bench(task, cheat, best)
    assert any(phrase in p for p in rec.problems), rec.problems
    assert not any("best" in p or "baseline" in p for p in rec.problems), (
        rec.problems
    )  # honest slots pass
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted and gate.category == "timing"
    assert canary.intact()


def test_b_recognising_repeated_benchmark_inputs_finds_none_and_is_timed_honestly(
    task, best, tmp_path, canary
):
    """Its cheap path fires on the third identical input in a row; every timed call now has
    inputs of its own, so it never fires: it is timed on its honest path (fast.py's code),
    as fast as the best — not the ~10x of a residual copy."""
    cheat = write_candidate(tmp_path, "timing_recognises_inputs.py")
    rec = _bench(task, cheat, best, aa=False)
    assert rec.problems == [], rec.problems
    assert _median(rec, "candidate") > 0.5 * _median(rec, "best"), (
        _median(rec, "candidate"),
        _median(rec, "best"),
    )
    assert canary.intact()


def test_b_evaluate_times_only_after_correctness_and_rejects_the_timed_cheat(
    task, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_knows_it_is_timed.py")
    rec = evaluate(task, cheat, device="cpu", shapes=SHAPE, screen=False, timeout_s=300)
    # Correct on every correctness call: only its timed outputs are wrong.
    assert all(c.passed for c in rec.checks), [c.reason for c in rec.failed_checks()]
    assert rec.verdict.category == "timing", rec.verdict.reasons
    assert "the timed output differs from the reference" in rec.verdict.reasons[0]
    assert canary.intact()


def test_b_a_rejected_candidate_is_never_timed(task, tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def forward(x, residual, weight, *, eps):\n    return residual.clone()\n")
    rec = evaluate(task, wrong, device="cpu", shapes=SHAPE, timeout_s=300)
    assert not rec.verdict.accepted and rec.timings == []


def test_c_a_worker_lying_about_its_samples_is_caught_by_the_trusted_clock(
    task, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_lying_timer.py")
    # _bench measures again while the machine is too busy for the trusted clock: the lie
    # is only caught where the clock can see it.
    rec = _bench(task, cheat, best)
    if any("too busy to time on" in p for p in rec.problems):
        pytest.skip(f"the machine was too busy for the trusted clock: {rec.problems[0]}")
    # The code-object swap slips past the worker's own tripwire: the trusted clock alone
    # catches it — rejected as a liar, or (where the excess was within the slack) its
    # samples raised to what the trusted clock saw, which makes it slower than the best.
    assert not any("replaced harness functions" in p for p in rec.problems), rec.problems
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted
    if any("claims a saving the trusted clock did not see" in p for p in rec.problems):
        assert gate.category == "timing"
    else:
        assert rec.problems == [] and gate.category == "slower", (rec.problems, gate)
        assert any("its samples were raised by" in w for w in rec.warnings), rec.warnings
        # It reports calls at a hundredth of their time; its samples were raised and the
        # gate refused it. Raised, it is usually slower than the best, but not always: the
        # CPU correction's noise (0-0.7 ms per call) once left it 0.64 vs 1.03 ms (CI
        # rehearsal, 2026-12-01; docs/security.md "Residual risks").
        assert _median(rec, "candidate") > 0.3 * _median(rec, "best"), rec.warnings
    assert canary.intact()


def test_c_probe_times_invented_to_cover_a_lie_are_a_protocol_violation(
    task, best, tmp_path, canary
):
    # The lying timer of (c) with the time it hides handed back as idle-probe time, which
    # the trusted side takes off a batch's wall time: before 2026-12-02 its batches added
    # up and it was accepted as ~50x faster than the best. Only non-candidate workers on a
    # GPU are asked to probe; anything else answering with probes is refused outright.
    cheat = write_candidate(tmp_path, "timing_padded_probes.py")
    rec = _bench(task, cheat, best)
    assert any("idle probes it was not asked for" in p for p in rec.problems), rec.problems
    assert not any("replaced harness functions" in p for p in rec.problems), rec.problems
    assert not performance_gate(rec, task.spec.rules).accepted
    assert canary.intact()


def test_e_replaying_a_kept_output_while_timed_is_caught_by_an_audit(task, best, tmp_path, canary):
    cheat = write_candidate(tmp_path, "timing_replays_output.py")
    rec = _bench(task, cheat, best, aa=False)
    assert any(
        "the timed output differs from the reference (candidate:" in p for p in rec.problems
    ), rec.problems
    assert not any("best" in p or "baseline" in p for p in rec.problems), rec.problems
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted and gate.category == "timing"
    assert canary.intact()


def test_f_skipping_calls_and_computing_audited_ones_later_is_caught_by_the_commitment(
    task, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_lazy_outputs.py")
    rec = _bench(task, cheat, best, aa=False)
    assert any("is not the one it committed to" in p for p in rec.problems), rec.problems
    assert not any("replaced harness functions" in p for p in rec.problems), rec.problems
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted and gate.category == "timing"
    assert canary.intact()


def _watch_states(token: str, stop: threading.Event, seen: dict) -> None:
    """Sample the state of every process carrying `token` every few ms (R/S running, T
    stopped). The full /proc scan that finds them runs only every 0.25 s: run every few ms
    it kept a CPU of a 2-core runner busy, and the best's turns waited for one."""
    pids: list[int] = []
    scanned = 0.0
    while not stop.is_set():
        if time.monotonic() - scanned > 0.25:
            pids, scanned = processes_with(token), time.monotonic()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            seen[state] = seen.get(state, 0) + 1
        time.sleep(0.004)


def test_d_busy_work_while_idle_is_stopped_with_the_candidate(task, best, honest, tmp_path, canary):
    token = f"kl-busy-{secrets.token_hex(6)}"
    cheat = write_candidate(
        tmp_path, "timing_busy_while_idle.py", TOKEN=token, CANARY=str(canary.path)
    )
    states: dict[str, int] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_states, args=(token, stop, states), daemon=True)
    watcher.start()
    try:
        rec = _bench(task, cheat, best, aa=False)
    finally:
        stop.set()
        watcher.join()
    # Refused for what it did in its own turns: its threads and children crowd its own
    # worker off the CPUs while the others ran uncontended (the kernel's run-queue wait,
    # read by the trusted side), or its busy thread holds its own GIL, so its batches take
    # far longer than its reported calls (the trusted clock check), or its children are
    # still alive at the end (a tamper problem). Never "the machine was too busy": that
    # would be retried as bad luck.
    assert any(
        "its own threads or processes crowd it" in p
        or "claims a saving the trusted clock did not see" in p
        or "process(es) running at the end" in p
        for p in rec.problems
    ), rec.problems
    assert not any("too busy" in p for p in rec.problems), rec.problems
    assert not any("best" in p or "baseline" in p for p in rec.problems), rec.problems
    assert not performance_gate(rec, task.spec.rules).accepted
    # Its busy children were stopped whenever another worker had its turn: unstopped they would
    # never be seen in state T. (They ran in the candidate's own turns and while every worker
    # imported and warmed up at once: 46-56% of samples were T in runs on a loaded 2-core box.)
    total = sum(states.values())
    assert total > 50 and states.get("T", 0) > 0.25 * total, states
    assert _median(rec, "best") < 2.5 * _median(honest, "best") + 0.2, (
        _median(rec, "best"),
        _median(honest, "best"),
    )
    assert processes_with(token) == []
    assert canary.intact()
