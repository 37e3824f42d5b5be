"""The one vocabulary of a candidate's outcome, from the CLI to the report, JSON included.

"Accepted" once meant four things (CPU `evaluate` printed ACCEPTED, `run` "correct, not
timed", the report's header "2 accepted" where nothing was promoted, the gate's pass); a
reader could not tell a kernel that passed the correctness checks from one that became the
best. Every place that names an outcome says one of these words (docs/loop.md, "Outcomes");
the stored verdict's `accepted`/`category` fields keep their names for the JSON readers.
"""

from __future__ import annotations

# Passed every correctness check (the judge's verdict; `kernelloop evaluate`).
JUDGED_CORRECT = "judged correct"
# Judged correct, faster than the best by the gate's margin, and the round's winner: the new best.
PROMOTED = "promoted"
# Judged correct and faster by the gate's margin, but another candidate of its round gained more.
NOT_PROMOTED = f"{JUDGED_CORRECT}, not promoted"
# Judged correct on a device whose timings do not count (the CPU's Triton interpreter).
NOT_TIMED = f"{JUDGED_CORRECT}, not timed"
# + " [category]": failed a correctness check or the gate's timing test.
REJECTED = "rejected"
# Refused before evaluation: a rule, or a duplicate.
REFUSED = "refused"
# An infrastructure failure: not the candidate's fault.
NOT_EVALUATED = "not evaluated"
# Proposed, no verdict yet.
PENDING = "pending"
# Round 0: the task's own implementation, the first best by definition.
BASELINE = "baseline"

OUTCOMES = (PROMOTED, NOT_PROMOTED, NOT_TIMED, REJECTED, REFUSED, NOT_EVALUATED, PENDING, BASELINE)

# `kernelloop evaluate`'s and `bench`'s headlines (the judge's and the gate's words).
JUDGED_CORRECT_HEADLINE = "JUDGED CORRECT"
GATE_PASSED_HEADLINE = "JUDGED CORRECT, FASTER BY THE GATE'S MARGIN"
# `kernelloop bench` alone: the gate's pass, correctness not judged by that command.
FASTER_HEADLINE = "FASTER BY THE GATE'S MARGIN"


def gained(outcome: str) -> bool:
    """Whether an outcome says the candidate was timed and beat the best by the gate's margin
    (promoted, or beaten only by another candidate of its round)."""
    text = outcome.strip().lower()
    return text.startswith(PROMOTED) or text.startswith(NOT_PROMOTED)


def judged(accepted: bool) -> str:
    """The correctness verdict of a record: "judged correct" or "rejected"."""
    return JUDGED_CORRECT if accepted else REJECTED


def gate_word(accepted: bool) -> str:
    """The performance gate's verdict: faster than the best by its margin, or rejected."""
    return "faster by the gate's margin" if accepted else REJECTED
