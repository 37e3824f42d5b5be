"""What the trusted clock saw of the candidate on one shape (bench_record.ClockView): the
numbers behind timing_checks.saving_check and through_check, kept for the record and
printed per shape, so a raise of an honest kernel's samples can be explained from them."""

from __future__ import annotations

import statistics

from kernelloop.evaluate.trusted.clock import through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.bench_record import ClockView


def clock_view(
    accs: dict[str, checks.Acc],
    claimed: dict[str, float],
    candidate: str,
    saving: float,
    through: float,
) -> ClockView | None:
    """`accs`, `claimed`: the gate's slots only (no evidence slot), `claimed` each one's
    median sample per call before any raise; `saving`/`through`: what each check would
    add (the larger is what was added). None when the candidate has no timed batches."""
    cand = accs.get(candidate)
    if cand is None or not cand.calls or candidate not in claimed:
        return None
    others = [a for s, a in accs.items() if s != candidate and a.calls and a.batches]
    view = ClockView(
        reported_ms=round(claimed[candidate], 6),
        harness_ms=round(cand.unaccounted_ms_per_call(), 6),
        others_harness_ms=round(
            statistics.median(a.unaccounted_ms_per_call() for a in others) if others else 0.0, 6
        ),
    )
    refs = [
        s for s in through_checks.through_refs(accs, candidate) if s in claimed and accs[s].through
    ]
    if cand.through and refs:
        ref = accs[refs[0]]
        view.through_ms = round(
            statistics.median(r.run_ms / max(r.units, 1) for r in cand.through), 6
        )
        view.others_through_ms = round(
            statistics.median(r.run_ms / max(r.units, 1) for r in ref.through), 6
        )
        view.others_reported_ms = round(claimed[refs[0]], 6)
    added = max(saving, through)
    if added > 0:
        view.raised_ms = round(added, 6)
        view.raised_by = "run-through batches" if through >= saving else "timed batches"
    return view
