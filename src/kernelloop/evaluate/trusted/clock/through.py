"""Run-through rounds (GPU): what the trusted clock checks a worker's events against.

After a shape's timed rounds, every worker runs a few batches of units back to back with
no host wait between them (worker/gpu_timer.GpuSlot.through): first every unit's inputs
from the round's secret seed, then a `made` line, then per unit the unit and a commitment
to its output — all queued on the stream. The worker reports nothing but the
commitments; the trusted side keeps its own clock at the command, at `made` and at the
answer. through_checks.through_check holds the candidate's two windows to the best's of the
same round. The candidate has one run-through output audited like a timed one: a cheaper
wrong path used only here is caught, and a saving claimed only in the timed batches has
nothing to hide behind.

Each turn is the same for every worker: resumed, an idle probe, the batch, an idle probe,
stopped. A non-candidate's probes (calibrated before any candidate code ran) show foreign
work on the GPU before or after its batch — the candidate's, since every other worker is
stopped; the candidate's own probes are run only so that every worker's GPU is in the same
state when its batch begins, and are ignored. The probes lie outside the batch's windows.

Rounds are shuffled with the secret RNG as the timed ones are. The first round warms the
allocator and is not counted. Batches in which a reference worker waited for a CPU do
not count for it (they would make its harness time look larger); more rounds run, up to
THROUGH_MAX_ROUNDS, until each reference has THROUGH_PAIRS quiet ones — or the machine is
reported too busy.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from kernelloop.evaluate.trusted.clock import through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.interleave_types import RoundsHost

if TYPE_CHECKING:
    from kernelloop.evaluate.trusted.values.plan import Call

_RNG = secrets.SystemRandom()
IDLE_CAP_S = 10.0


def through_rounds(
    sess: RoundsHost, call: Call, n: int, per_call_ms: float, audited: set[str], accs: dict
) -> bool:
    """Run-through rounds of `n` units per batch; False when a problem was found."""
    label, cand = call.shape.label, sess.candidate
    audit_at = {slot: 1 + _RNG.randrange(through_checks.THROUGH_ROUNDS) for slot in audited}
    known = len(sess.out.problems)
    cap = max(30.0, 50 * n * per_call_ms / 1e3)

    def short() -> list[str]:
        refs = through_checks.through_refs(accs, cand) or [s for s in accs if s != cand]
        return [s for s in refs if accs[s].quiet_rounds() < through_checks.THROUGH_PAIRS]

    r = 0
    while r <= through_checks.THROUGH_ROUNDS or (
        r <= through_checks.THROUGH_MAX_ROUNDS and short()
    ):
        order = sess.core()  # the gate's slots: an evidence slot is not held to this check
        _RNG.shuffle(order)
        seed = secrets.randbits(31)
        for slot in order:
            key = secrets.randbits(62)
            ans = through_turn(sess, slot, cap, n=n, seed=seed, key=key)
            if r > 0:
                accs[slot].add_through(ans, r)
            _check(sess, label, slot, n, ans)
            if len(sess.out.problems) > known:
                return False
            if audit_at.get(slot) == r:
                j = _RNG.randrange(len(ans.body.commits))
                if not sess._audit(call, slot, seed, key, ans.body.commits, j):  # noqa: SLF001
                    return False
        r += 1
    if lacking := short():
        which = ", ".join(
            f"{s} {accs[s].quiet_rounds()} of {len(accs[s].through)}" for s in lacking
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


def through_turn(sess: RoundsHost, slot: str, cap: float, **args):
    """One worker's run-through turn: resumed, idle probe, batch (its `made` line's time kept
    on the answer as `marked`, the probes' tries as its `pre`/`post`), idle probe, stopped."""
    w = sess.workers[slot]

    def act():
        pre = w.ask("idle", sess.left(IDLE_CAP_S))
        sent = w.send("through", **args)
        marked = w.collect("through", sent, sess.left(cap), expected="made").received
        ans = w.collect("through", sent, sess.left(cap))
        return pre, marked, ans, w.ask("idle", sess.left(IDLE_CAP_S))

    (pre, marked, ans, post), waited_s = sess.held(w, act)
    ans.marked, ans.waited_s = marked, waited_s
    if ans.body.pre or ans.body.post:  # a batch asked for no probes: these are not real
        sess.problem(
            "protocol",
            slot,
            f"{slot}'s worker answered a run-through batch with idle probes it was not asked "
            "for (they would be taken off its own time): its numbers are not real",
        )
    # A calibrated worker's probes are judged (_check); the candidate's are not kept.
    calibrated = slot in sess.cal
    ans.body.pre = pre.body.tries if calibrated else []
    ans.body.post = post.body.tries if calibrated else []
    return ans


def _check(sess: RoundsHost, label: str, slot: str, n: int, ans) -> None:
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
