"""Run-through rounds (GPU): what the trusted clock checks a worker's events against.

After a shape's timed rounds, every worker runs a few batches of units back to back with
no host wait between them (worker/gpu_timer.GpuSlot.through): per unit, inputs of its
own from the round's secret seed, an L2 flush, the unit, a commitment to its output —
all queued on the stream. The worker reports nothing but the commitments; the trusted
side keeps its own wall time per batch. Per implementation, trusted time per unit minus
what its events claimed per unit is the harness's work, the same for every
implementation of the shape: timing_checks.through_check holds the candidate's to the
others'. The candidate (and the A/A copy of it, if any) has one run-through output
audited like a timed one: a cheaper wrong path used only here is caught, and a saving
claimed only in the timed batches has nothing to hide behind.

Rounds are shuffled with the secret RNG as the timed ones are; the other workers are
stopped during each turn and probe the GPU for foreign work before and after theirs.
Batches in which a worker waited for a CPU do not count for the others (they would make
the others' harness time look larger); more rounds run, up to THROUGH_MAX_ROUNDS, until
each has QUIET_MIN quiet ones — or the machine is reported too busy.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from kernelloop.evaluate.trusted import timing_checks as checks

if TYPE_CHECKING:
    from kernelloop.evaluate.trusted.interleave import Session
    from kernelloop.evaluate.trusted.plan import Call

_RNG = secrets.SystemRandom()


def through_rounds(
    sess: Session, call: Call, n: int, per_call_ms: float, audited: set[str], accs: dict
) -> bool:
    """Run-through rounds of `n` units per batch; False when a problem was found."""
    label, cand = call.shape.label, sess.candidate
    audit_at = {slot: _RNG.randrange(checks.THROUGH_ROUNDS) for slot in audited}
    known = len(sess.out.problems)

    def short() -> bool:
        return any(
            len(a.through) < checks.QUIET_MIN for s, a in accs.items() if s != cand and a.calls
        )

    r = 0
    while r < checks.THROUGH_ROUNDS or (r < checks.THROUGH_MAX_ROUNDS and short()):
        order = sess.core()  # the gate's slots: an evidence slot is not held to this check
        _RNG.shuffle(order)
        seed = secrets.randbits(31)
        for slot in order:
            key = secrets.randbits(62)
            ans = sess.turn(
                slot,
                "through",
                max(30.0, 50 * n * per_call_ms / 1e3),
                n=n,
                seed=seed,
                key=key,
                probe=slot != cand,
            )
            accs[slot].add_through(ans)
            _check(sess, label, slot, n, ans)
            if len(sess.out.problems) > known:
                return False
            if audit_at.get(slot) == r:
                j = _RNG.randrange(len(ans.body.commits))
                if not sess._audit(call, slot, seed, key, ans.body.commits, j):  # noqa: SLF001
                    return False
        r += 1
    if short():
        which = ", ".join(
            f"{s} {len(a.through)} of {len(a.through_all)}"
            for s, a in accs.items()
            if s != cand and len(a.through) < checks.QUIET_MIN
        )
        sess.problem(
            "timing",
            cand,
            f"{label}: {checks.BUSY}: run-through batches in which the worker waited for a "
            f"CPU ({which} quiet) leave too few to check the timings against the trusted "
            "clock; run again on an idle machine",
        )
        return False
    return True


def _check(sess: Session, label: str, slot: str, n: int, ans) -> None:
    b = ans.body
    if len(b.commits) != n:
        sess.problem(
            "protocol",
            slot,
            f"{label}: {slot}'s worker committed to {len(b.commits)} outputs for a "
            f"run-through batch of {n} units",
        )
    if b.tampered:
        sess.problem(
            "tamper",
            slot,
            f"{slot} replaced harness functions ({', '.join(b.tampered[:5])}) during timing",
        )
    if slot in sess.cal and (bad := checks.interference_problem(label, slot, ans, sess.cal[slot])):
        sess.problem("timing", sess.candidate, bad)
