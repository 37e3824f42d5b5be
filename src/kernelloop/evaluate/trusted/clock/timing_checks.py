"""What the trusted side checks in a timing run, from its own clock and its own reference.

Per batch (one worker, `n` timed calls, the others stopped):
- the intervals the worker reports (calls, calibration calls, idle probes) must fit in the
  wall time between sending the command and receiving the answer: a worker cannot claim
  more time than elapsed (e.g. to make the best look slow);
- a non-candidate worker's idle probes before and after its batch must look like its own
  calibration, taken before any candidate code ran: otherwise someone else's work was on
  the GPU during the best's turn — the candidate's, since every other worker is idle;
- every timed call ran on inputs of its own (from the batch's secret seed) and the worker
  committed to each call's output inside the batch; the trusted side then audits calls
  of its choosing (interleave.py): the output must match its commitment and the float64
  reference for that call's inputs.
Per shape:
- the candidate's unaccounted time per call (trusted wall time minus what it reports)
  may not exceed the other implementations' by more than a calibrated slack: whatever
  it claims to save over the best, the trusted clock must have seen;
- at least one audited output of the candidate (and of its A/A copy), read from its
  worker's folder by name (never following a link, exact size) and judged with the same
  comparison as every correctness call.
"""

from __future__ import annotations

import os
import stat
import statistics
from dataclasses import dataclass, field

from kernelloop.evaluate.protocol import idle_busy, idle_stats
from kernelloop.evaluate.trusted.channel.outputs import read_exactly

BATCH_SLACK = (
    1.01,
    0.002,
)  # reported time may exceed the trusted wall by 1% + 2 ms (clock granularity)
# Audits: each audited slot has about AUDIT_BYTES of timed outputs read back per shape,
# between MIN_AUDITS and MAX_AUDITS calls, each picked after its batch came back.
AUDIT_BYTES = 1 << 30
MIN_AUDITS, MAX_AUDITS = 2, 6
RETAIN_BYTES = 2 << 30  # a batch keeps every output until the audit: its size is capped by this
# Unaccounted time per call: the candidate's may exceed the median of the other
# implementations' by max(floor, 2 × their spread) + REL × their time per call. The floor
# absorbs the per-batch command round trip (spread over the batch's calls) and host jitter;
# the spread term grows with the machine's other load (measured on a 2-core runner at load
# 7-9: honest low quartiles 0.13-4.6 ms per call, within 0.3 ms of each other but for a slow
# baseline's).
SAVING_FLOOR_MS = {"cuda": 0.02, "cpu": 0.05}
SAVING_BATCH_MS = {"cuda": 0.5, "cpu": 1.0}
SAVING_REL = 0.05
# ... and + OVERHEAD_REL × their own unaccounted time: the harness's work per call between
# calls (loading the call's inputs, committing to its output: ~1.5 ms per MB of output on
# a CPU with SHA extensions, twice that without) moves with the implementation's memory
# layout, so its noise grows with its size (measured on CI's 2-core runner: an honest
# candidate's lower quartile 1 ms above the others' at ~3 ms each).
OVERHEAD_REL = 0.2
REJECT_REL = 0.5  # an excess beyond half the claimed time per call is a lie, not spill: rejected
CAL_CREDIT = (1.1, 0.01)  # a calibration call counts for at most 1.1 × the call + 10 µs
# A batch during which the worker's threads waited for a CPU (the kernel's run-queue
# accounting, read by the trusted side) longer than this share of its wall time, or 1 ms,
# was contended: the machine's other load, or the worker's own threads crowding it. Its
# wall time says nothing about what the worker reports, so the saving check reads only
# uncontended batches, and judges nothing without QUIET_MIN of them per implementation
# (measured on a 2-core box with three other busy processes: honest unaccounted times of
# 2-7 ms per call, as large as a lying worker's hidden call; idle: waits of ~0.01 ms).
CONTENDED = (0.05, 1.0)
BUSY = "the machine was too busy to time on"  # an infrastructure fault, not a verdict
QUIET_MIN = 2
# A candidate whose median run-queue wait per batch is this many times the others' crowds
# its own worker (CI's 2-core runner: the red team's busy candidate waited 100-1500 ms per
# batch, while the best, on that runner, had waits of a few ms in 4 of 5 batches).
CROWDED_RATIO = 10.0
# ... and in either case the candidate's typical wait must be at least this share of its
# typical batch: a worker crowded by its own spinning threads or children waits most of
# each batch (the red team's: several times the batch, summed over its threads), while an
# honest worker on a busy 2-core runner was left short alone, identical code to the best,
# with 1.6 ms waits in ~20 ms batches (CI, 2026-12-01): bad luck, refused as BUSY.
CROWDED_SHARE = 0.25
# Short alone counts as crowding only where the others were mostly uncontended (at most
# this share of their batches): under a machine's load every worker waits in most batches,
# and the candidate, with the fewest batches, is the likeliest to be left short by chance
# (two busy processes on the 2-core box, 2026-12-03: a candidate without threads of its
# own short in 6 of 6 batches, waiting 13.9 ms per batch against the others' 14.4 ms).
CROWDED_OTHERS_CONTENDED = 0.5


@dataclass(frozen=True)
class ThroughRow:
    """One run-through batch on the trusted clock."""

    round: int
    make_ms: float  # the command sent -> the worker's `made` line
    run_ms: float  # `made` -> the answer: the units and their commitments
    units: int
    quiet: bool  # the worker did not wait for a CPU (CONTENDED)
    phases_ms: tuple[float, ...] = ()  # the worker's own view: diagnostics, never checked


@dataclass
class Acc:
    """Everything one worker answered on one shape."""

    calls: list[list[float]] = field(default_factory=list)
    cals: list[tuple[float, float]] = field(default_factory=list)
    wall_s: float = 0.0
    probe_ms: float = 0.0
    batches: list[tuple[float, list, list]] = field(
        default_factory=list
    )  # (wall - probes ms, calls, cals), uncontended batches only
    contended: int = 0  # batches left out: the worker waited for a CPU (CONTENDED)
    waits_ms: list[float] = field(default_factory=list)  # every batch's run-queue wait
    walls_ms: list[float] = field(default_factory=list)  # and its trusted wall time
    no_launch: int = 0
    # run-through batches that count (the warm-up round's are not kept), in round order
    through: list[ThroughRow] = field(default_factory=list)

    def add_through(self, ans, round_: int) -> None:
        """One counted run-through batch: `ans.marked` is the trusted clock at its `made`."""
        b = ans.body
        wall_ms, waited_ms = ans.wall_s * 1e3, getattr(ans, "waited_s", 0.0) * 1e3
        self.wall_s += ans.wall_s
        self.no_launch += b.no_launch
        self.through.append(
            ThroughRow(
                round_,
                (ans.marked - ans.sent) * 1e3,
                (ans.received - ans.marked) * 1e3,
                len(b.commits),
                waited_ms <= max(CONTENDED[0] * wall_ms, CONTENDED[1]),
                tuple(b.phases_ms),
            )
        )

    def quiet_rounds(self) -> int:
        return sum(r.quiet for r in self.through)

    def add(self, ans) -> None:
        b = ans.body
        self.calls += b.calls
        self.cals += b.cals
        self.wall_s += ans.wall_s
        probe_ms = sum(h for tries in (*b.pre, *b.post) for h, _ in tries)
        self.probe_ms += probe_ms
        wall_ms, waited_ms = ans.wall_s * 1e3, getattr(ans, "waited_s", 0.0) * 1e3
        self.waits_ms.append(waited_ms)
        self.walls_ms.append(wall_ms)
        if waited_ms > max(CONTENDED[0] * wall_ms, CONTENDED[1]):
            self.contended += 1
        else:
            self.batches.append((wall_ms - probe_ms, b.calls, b.cals))
        self.no_launch += b.no_launch

    def reported_ms(self) -> float:
        return sum(c[-1] for c in self.calls) + sum(s for _, s in self.cals)

    def unaccounted_ms_per_call(self) -> float:
        """Trusted wall time not covered by reported intervals, per timed unit: the lower
        quartile over batches. A worker that under-reports does so in every batch, while the
        machine's other load only ever adds time (it delayed a batch's wake-up or its
        answer), so the low quantile is the harness's own overhead. Calibration calls get
        credit only up to about the length of a call (their purpose)."""
        if not self.calls or not self.batches:
            return 0.0
        cap = CAL_CREDIT[0] * statistics.median(c[-1] for c in self.calls) + CAL_CREDIT[1]
        per = sorted(
            (wall - sum(c[-1] for c in calls) - sum(min(s, cap) for _, s in cals)) / len(calls)
            for wall, calls, cals in self.batches
        )
        return per[(len(per) - 1) // 4]


def batch_clock_problem(label: str, slot: str, ans) -> str | None:
    b = ans.body
    reported = (
        sum(c[-1] for c in b.calls)
        + sum(s for _, s in b.cals)
        + sum(h for tries in (*b.pre, *b.post) for h, _ in tries)
    ) / 1e3
    if reported > ans.wall_s * BATCH_SLACK[0] + BATCH_SLACK[1]:
        return (
            f"{label}: {slot}'s worker reported {reported:.4f} s of timed calls in a batch that "
            "took "
            f"{ans.wall_s:.4f} s on the trusted clock: its numbers are not real"
        )
    return None


def interference_problem(label: str, slot: str, ans, cal: dict[str, float]) -> str | None:
    """Foreign GPU work around a non-candidate batch (every try of a probe looked busy)."""
    for when, tries in (("before", ans.body.pre), ("after", ans.body.post)):
        if tries and all(idle_busy(t, cal) for t in tries):
            host = statistics.median(h for h, _ in tries[-1])
            return (
                f"{label}: foreign GPU work was running {when} {slot}'s timed batch (idle probe "
                f"{host:.3f} ms against {cal['host_p90']:.3f} ms calibrated): another process — "
                "the candidate, "
                f"since every other worker was stopped — left work on the GPU"
            )
    return None


def calibration(probes: list[tuple[float, float]]) -> dict[str, float]:
    return idle_stats(probes)


def busy_problem(label: str, accs: dict[str, Acc], candidate: str) -> str | None:
    """Too few uncontended batches to check the candidate's claims against the trusted
    clock: the measurement is refused, not guessed. Where the candidate is short and
    either every other implementation had its quiet batches in the same shuffled rounds,
    or the candidate's typical wait per batch is CROWDED_RATIO times theirs (a machine's
    load delays every worker alike), the candidate crowded its own worker (threads or
    processes of its own): that is its doing, said as such — provided its waits fill a
    good share of its batches (CROWDED_SHARE), and, when it is short alone, the others
    were mostly uncontended (CROWDED_OTHERS_CONTENDED); otherwise the machine was busy (an
    infrastructure fault: BUSY)."""
    short = {s: a for s, a in accs.items() if a.calls and len(a.batches) < QUIET_MIN}
    if not short or candidate not in accs:
        return None
    which = ", ".join(
        f"{s} {a.contended} of {a.contended + len(a.batches)}" for s, a in short.items()
    )
    cand = accs[candidate]
    others = [
        statistics.median(a.waits_ms) for s, a in accs.items() if s != candidate and a.waits_ms
    ]
    own_w = statistics.median(cand.waits_ms) if cand.waits_ms else 0.0
    other_w = statistics.median(others) if others else 0.0
    own_wall = statistics.median(cand.walls_ms) if cand.walls_ms else 0.0
    dominant = (
        candidate in short and bool(others) and own_w > max(CROWDED_RATIO * other_w, CONTENDED[1])
    )
    rest = [a for s, a in accs.items() if s != candidate and a.calls]
    rest_batches = sum(a.contended + len(a.batches) for a in rest)
    rest_share = sum(a.contended for a in rest) / rest_batches if rest_batches else 1.0
    alone = set(short) == {candidate} and bool(rest) and rest_share <= CROWDED_OTHERS_CONTENDED
    if (alone or dominant) and own_w >= CROWDED_SHARE * own_wall:
        return (
            f"{label}: the candidate's worker waited for a CPU in {cand.contended} of "
            f"{cand.contended + len(cand.batches)} batches (median {own_w:.1f} ms per batch, "
            f"against {other_w:.1f} ms for the other implementations timed in the "
            "same shuffled rounds): its own threads or processes crowd it, so its timings "
            "cannot be checked against the trusted clock"
        )
    return (
        f"{label}: {BUSY}: batches in which the worker waited "
        f"for a CPU ({which}) leave too few to check the timings against the trusted clock; "
        "run again on an idle machine"
    )


def saving_check(
    label: str, accs: dict[str, Acc], candidate: str, device: str
) -> tuple[float, str | None]:
    """(ms per call to add to the candidate's samples, reason to reject or None).

    The candidate's claimed saving must be one the trusted clock saw: time its batches
    took beyond what it reports, in excess of the other implementations' (plus a slack),
    is added back to its samples — an honest candidate whose own Python work spills
    outside its calls (garbage collection after a per-row loop: ~5% of a 250 ms call,
    measured) is judged by what the trusted clock saw, and a liar gains nothing. An excess
    larger than half of what it claims per call is not spill: its numbers are not real.

    On a CPU the whole excess is added back, not only what lies beyond the slack: there
    a call is timed by a wall clock in the candidate's own process, and the harness's
    work per call (its inputs, the SHA-256 commitment to a 1 MB output: ~2 ms on the
    2-core runner) is as large as the calls, so the slack (~2 ms from the others' spread)
    would hide a lie as large as the best's whole call. A worker reporting a 2 ms call
    at 0.02 ms slipped under it in 1 of 8 runs on an idle runner (2026-12-01). The cost
    to an honest candidate is the noise of the estimate (its excess is about as often
    negative as positive; only the positive part is added)."""
    cand = accs.get(candidate)
    others = {s: a for s, a in accs.items() if s != candidate and a.calls and a.batches}
    if cand is None or not cand.calls or not cand.batches or not others:
        return 0.0, None
    own = [a.unaccounted_ms_per_call() for a in others.values()]
    per_call = statistics.median(a.reported_ms() / len(a.calls) for a in others.values())
    calls_per_batch = max(1.0, len(cand.calls) / max(len(cand.batches), 1))
    floor = SAVING_FLOOR_MS[device] + SAVING_BATCH_MS[device] / calls_per_batch
    ref = statistics.median(own)
    slack = max(floor, 2 * (max(own) - min(own))) + SAVING_REL * per_call + OVERHEAD_REL * ref
    got = cand.unaccounted_ms_per_call()
    excess = got - ref
    if excess <= (0.0 if device == "cpu" else slack):
        return 0.0, None
    claimed = cand.reported_ms() / len(cand.calls)
    if excess > REJECT_REL * claimed + slack:
        return 0.0, (
            f"{label}: the trusted clock saw {got:.4f} ms per call of the candidate's batches "
            "that its own "
            f"numbers do not account for, against {ref:.4f} ms for the other implementations "
            "(slack "
            f"{slack:.4f} ms) and {claimed:.4f} ms it claims per call: it claims a saving the "
            "trusted clock "
            f"did not see, so its numbers are not real"
        )
    return excess, None


def read_output(path: os.PathLike, nbytes: int) -> bytearray:
    """A worker's output file: opened by name without following links, a regular file of
    exactly `nbytes` bytes, read whole (straight into one buffer: reading chunks and
    joining them cost an audit of a 512 MB output ~0.16 s on the H200) and removed.
    Raises ValueError/OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("the output is not a regular file")
        if st.st_size != nbytes:
            raise ValueError(f"the output file has {st.st_size} bytes, expected {nbytes}")
        buf = bytearray(nbytes)
        if not read_exactly(fd, memoryview(buf)):
            raise ValueError("the output file ended early")
        return buf
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass


def audit_chance(out_bytes: int, batches_expected: float) -> tuple[int, float]:
    """(audits wanted on this shape, the chance to audit any one batch)."""
    want = max(MIN_AUDITS, min(MAX_AUDITS, AUDIT_BYTES // max(out_bytes, 1)))
    return want, min(1.0, want / max(batches_expected, 1.0))
