"""A shape's timings held to the trusted clock (a part of interleave.Session), after its
rounds: calls that launched nothing, a machine too busy to check on (or a candidate that
crowds its own worker), the saving the candidate claims against what the clock saw
(timing_checks.saving_check) and, on a GPU, the run-through check (through_checks). What
the clock saw beyond the candidate's claim is added to its samples or, past the limits,
rejects it."""

from __future__ import annotations

import statistics

from kernelloop.evaluate.trusted.clock import through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.clock_view import clock_view
from kernelloop.evaluate.trusted.clock.interleave_types import SlotResult
from kernelloop.evaluate.trusted.values.plan import Call


class ShapeChecksMixin:
    def _check_shape(
        self, call: Call, accs: dict[str, checks.Acc], res: dict[str, SlotResult]
    ) -> None:
        label = call.shape.label
        for slot, a in accs.items():
            if a.no_launch:
                self.problem(
                    "timing",
                    slot,
                    f"{a.no_launch} of {len(a.calls)} timed calls launched none of the "
                    f"candidate's kernels (a replayed or skipped result while timed)",
                )
        if self.out.problems:  # already refused (a failed audit ends the rounds early)
            return
        # The trusted clock holds the candidate to the gate's slots alone.
        accs = {s: a for s, a in accs.items() if s not in self.evidence}
        res = {s: r for s, r in res.items() if s not in self.evidence}
        if not self.interp and (busy := checks.busy_problem(label, accs, self.candidate)):
            self.problem("timing", self.candidate, busy)
            return
        saving, bad = checks.saving_check(label, accs, self.candidate, self.device)
        added, through = saving, 0.0
        claimed = {
            s: statistics.median(r.samples_ms) * r.per_unit for s, r in res.items() if r.samples_ms
        }
        if bad is None and self.cuda:
            through, bad = through_checks.through_check(label, accs, claimed, self.candidate)
            added = max(added, through)  # one excess seen two ways: added once
        if bad is None:  # what the clock saw, for the record and bench's per-shape line
            self.out.clock[label] = clock_view(accs, claimed, self.candidate, saving, through)
        if bad is not None:
            self.problem("timing", self.candidate, bad)
        elif added > 0:
            r = res[self.candidate]
            r.samples_ms = [x + added / r.per_unit for x in r.samples_ms]
            self.out.warnings.append(
                f"{label}: the candidate's batches took {added:.4f} ms per call longer than its "
                f"reported calls account for (beyond the others'); its samples were raised by "
                f"that much, to what the trusted clock saw"
            )
