"""Explainable corrections (issue 34): per shape, what the trusted clock saw of the
candidate beside what it reported, and why its samples were raised — in the record
(ShapeBench.clock) and as one line of bench's output. The numbers come from the same
Accs the saving and run-through checks read (tests/bench/test_timing_parts.py's helpers)."""

import pytest

from kernelloop.evaluate.trusted.clock import through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.bench_record import ShapeBench
from kernelloop.evaluate.trusted.clock.clock_view import clock_view
from tests.bench.test_timing_parts import CLAIMED, _acc, _accs, _rows


def test_a_spill_raise_says_what_the_clock_saw_and_by_how_much():
    # 250 ms calls leaving 12 ms of their own work outside the measured interval (CPU).
    accs = {
        "candidate": _acc(262.0, 250.0, 0.5, n=1),
        "best": _acc(7.0, 7.0, 0.5, n=1),
        "best#aa": _acc(7.0, 7.0, 0.55, n=1),
    }
    saving, bad = checks.saving_check("s", accs, "candidate", "cpu")
    assert bad is None
    view = clock_view(
        accs, {"candidate": 250.0, "best": 7.0, "best#aa": 7.0}, "candidate", saving, 0.0
    )
    assert view.reported_ms == 250.0
    assert view.harness_ms == pytest.approx(12.5, abs=0.01)
    assert view.others_harness_ms == pytest.approx(0.525, abs=0.01)
    assert view.raised_ms == pytest.approx(12.0, abs=0.1) and view.raised_by == "timed batches"
    assert view.through_ms is None  # no run-through batches on a CPU
    line = view.line("3x40000")
    assert line.startswith("3x40000: trusted clock: candidate reported 250.0000 ms/call")
    assert (
        f"raised by {view.raised_ms:.4f} ms/call" in line
        and "timed batches took that much longer" in line
    )
    # It travels in the record (JSON round trip) and renders the same from there.
    sb = ShapeBench(shape="3x40000", dtype="float32", weight=1, tag="", clock=view)
    back = ShapeBench.model_validate_json(sb.model_dump_json())
    assert back.clock.line("3x40000") == line


def test_an_honest_candidate_is_shown_not_raised():
    accs = {
        "candidate": _acc(0.5, 0.5, 0.1),
        "best": _acc(1.0, 1.0, 0.1),
        "baseline": _acc(3.0, 3.0, 0.12),
    }
    saving, bad = checks.saving_check("s", accs, "candidate", "cpu")
    assert (saving, bad) == (0.0, None)
    view = clock_view(accs, {"candidate": 0.5, "best": 1.0, "baseline": 3.0}, "candidate", 0.0, 0.0)
    assert view.raised_ms == 0 and view.raised_by == ""
    assert view.harness_ms == pytest.approx(0.1, abs=0.001)
    assert view.line("s").endswith("-> not raised")


def test_a_run_through_raise_names_the_back_to_back_windows():
    # A 6% lie on the flagship's largest shape (test_run_through_compares_round_by_round).
    accs = _accs(_rows(d_run=0.001))
    claimed = {**CLAIMED, "candidate": 0.863}
    through, bad = through_checks.through_check("s", accs, claimed, "candidate")
    assert bad is None and through > 0.05
    view = clock_view(accs, claimed, "candidate", 0.0, through)
    assert view.raised_by == "run-through batches" and view.raised_ms == pytest.approx(through)
    assert view.through_ms == pytest.approx(
        sum(_rows(d_run=0.001)[i][1] for i in (0, 1)) / 2, abs=0.05
    )
    assert view.others_reported_ms == 0.918
    assert "back to back" in view.line("s") and "run-through batches took" in view.line("s")
