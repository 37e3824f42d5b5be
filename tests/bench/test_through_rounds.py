"""The run-through rounds' protocol on the trusted side (trusted/clock/through.py), with stub
workers that answer as real ones do: the GPU-only path's bookkeeping checked on any
machine — the `made` line splits each batch, the warm-up round is not counted, every
worker's turn is idle probe / batch / idle probe, a batch answered with probes it was not
asked for is refused, a reference that waited for a CPU gets more rounds and then the
machine is reported busy. (The timing itself is measured on the H200: test_timing_gpu.py,
benchmarks/through_power.py.)"""

from __future__ import annotations

from types import SimpleNamespace

from kernelloop.evaluate.trusted.channel import wire
from kernelloop.evaluate.trusted.clock import through, through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.interleave import Session
from kernelloop.evaluate.trusted.launch.workers import Answer


class _Freezer:
    def __init__(self) -> None:
        self.ns = 0

    def waited_ns(self) -> int:
        return self.ns


class _Worker:
    """Answers `idle` and `through` (with its `made` line) on a simulated clock."""

    def __init__(
        self, make_ms: float, run_ms: float, wait_ms: float = 0.0, pre=None, idle=(0.05, 0.015)
    ) -> None:
        self.make_ms, self.run_ms, self.wait_ms, self.extra_pre = make_ms, run_ms, wait_ms, pre
        self.idle = idle
        self.freezer, self.dead, self.clock = _Freezer(), False, 100.0
        self.log: list[str] = []

    def resume(self) -> None:
        self.log.append("resume")

    def pause(self) -> None:
        self.log.append("pause")
        self.freezer.ns += int(self.wait_ms * 1e6)

    def ask(self, cmd: str, timeout_s: float, **args) -> Answer:
        self.log.append(cmd)
        self.clock += 0.001
        tries = [[self.idle] * 3]
        return Answer("idle", wire.Idle(tries=tries), self.clock - 0.001, self.clock)

    def send(self, cmd: str, **args) -> float:
        self.log.append(cmd)
        self.n = args["n"]
        return self.clock

    def collect(self, cmd: str, sent: float, timeout_s: float, expected: str | None = None):
        if expected == "made":
            self.log.append("made")
            self.clock = sent + self.make_ms * self.n / 1e3
            return Answer("made", wire.Made(), sent, self.clock)
        self.clock += self.run_ms * self.n / 1e3
        body = wire.Through(commits=["c"] * self.n, pre=self.extra_pre or [])
        return Answer("through", body, sent, self.clock)


class _Session:
    def __init__(self, workers: dict[str, _Worker]) -> None:
        self.workers, self.candidate = workers, "candidate"
        cal = checks.calibration([(0.05, 0.015)] * 30)
        self.cal = {s: cal for s in workers if s != "candidate"}
        self.out = SimpleNamespace(problems=[])
        self.audits: list[tuple[str, int]] = []

    held = Session.held  # resumed, the act, stopped: the real session's

    def core(self) -> list[str]:
        return list(self.workers)

    def left(self, cap: float) -> float:
        return cap

    def problem(self, category: str, slot: str, text: str) -> None:
        self.out.problems.append(SimpleNamespace(category=category, slot=slot, text=text))

    def _audit(self, call, slot, seed, key, commits, j) -> bool:
        self.audits.append((slot, len(commits)))
        return True


CALL = SimpleNamespace(shape=SimpleNamespace(label="16384x8192"))


def _run(workers: dict[str, _Worker]):
    sess = _Session(workers)
    accs = {s: checks.Acc() for s in workers}
    ok = through.through_rounds(sess, CALL, 7, 0.9, {"candidate"}, accs)
    return ok, sess, accs


def test_each_turn_is_probe_batch_probe_and_the_made_line_splits_the_batch():
    ok, sess, accs = _run(
        {
            "candidate": _Worker(1.06, 1.23),
            "best": _Worker(1.05, 1.23),
            "baseline": _Worker(1.05, 1.5),
        }
    )
    assert ok and sess.out.problems == []
    for slot, acc in accs.items():
        # the warm-up round is run, not counted
        assert [r.round for r in acc.through] == list(range(1, through_checks.THROUGH_ROUNDS + 1))
        w = sess.workers[slot]
        turn = ["resume", "idle", "through", "made", "idle", "pause"]
        assert w.log == turn * (through_checks.THROUGH_ROUNDS + 1)
    row = accs["candidate"].through[0]
    assert abs(row.make_ms - 1.06 * 7) < 1e-6 and abs(row.run_ms - 1.23 * 7) < 1e-6
    assert row.units == 7 and row.quiet
    # one run-through output of the candidate audited, in a counted round
    assert sess.audits == [("candidate", 7)]
    # held to the best, the honest candidate's claim matches what the clock saw
    claimed = {"candidate": 0.918, "best": 0.918, "baseline": 1.2}
    assert through_checks.through_check("s", accs, claimed, "candidate") == (0.0, None)


def test_a_batch_answered_with_probes_it_was_not_asked_for_is_refused():
    # Probe times used to be taken off a batch's wall time: the candidate's worker could
    # claim its own time away with them.
    sneaky = _Worker(1.06, 1.23, pre=[[(5.0, 0.0)]])
    ok, sess, _ = _run({"candidate": sneaky, "best": _Worker(1.05, 1.23)})
    assert not ok
    assert any(
        p.category == "protocol" and "idle probes it was not asked for" in p.text
        for p in sess.out.problems
    )


def test_a_reference_that_waited_for_a_cpu_gets_more_rounds_then_the_machine_is_busy():
    ok, sess, accs = _run({"candidate": _Worker(1.06, 1.23), "best": _Worker(1.05, 1.23, 50.0)})
    assert not ok
    assert len(accs["best"].through) == through_checks.THROUGH_MAX_ROUNDS  # rounds 1..max counted
    assert any(checks.BUSY in p.text and "best 0 of" in p.text for p in sess.out.problems)


def test_foreign_work_around_a_references_batch_is_seen_by_its_own_idle_probes():
    # The probes are their own commands now, outside the batch's windows; a calibrated
    # worker's are still judged: busy ones mean someone else's work was on the GPU.
    busy = _Worker(1.05, 1.23, idle=(3.0, 2.5))
    ok, sess, _ = _run({"candidate": _Worker(1.06, 1.23), "best": busy})
    assert not ok
    assert any("foreign GPU work was running" in p.text for p in sess.out.problems)
