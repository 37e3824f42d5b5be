"""The interleaved benchmark's settings, its constants and what it returns (interleave.py
runs it)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

if TYPE_CHECKING:
    from kernelloop.evaluate.trusted.values.plan import Call

T = TypeVar("T")

_RNG = secrets.SystemRandom()
OVERHEAD_MS = {"cuda": 0.3, "cpu": 0.05}  # harness cost per timed call, for sizing batches
QUIET_PATIENCE = 4.0  # × a shape's time budget, at most, to gather uncontended batches
# An evidence slot is dropped once less than this share of the benchmark's time limit is
# left: the limit is the candidate's, and running into it would fail the candidate.
EVIDENCE_RESERVE = 0.3


@dataclass
class Settings:
    """How much to time. GPU: rounds until the shape's budget (the samples spread over it,
    so a clock transient cannot carry a median), at most `reps` calls per implementation.
    CPU: single-threaded so a shared runner's other load perturbs it less."""

    reps: int = 400
    min_reps: int = 20
    warmup: int = 3
    warmup_s: float = 0.05
    max_s_per_shape: float | None = None  # default: 0.6 s on a GPU, 0.8 s on a CPU
    cpu_reps: int = 200
    cpu_min_reps: int = 15
    cpu_warmup: int = 2
    cpu_threads: int = 1
    batch_s: float | None = None  # target length of one batch (default 10 ms GPU, 20 ms CPU)
    graphs: bool = True
    ramp_s: float = 1.5  # at most this long busy before the first shape, until clocks settle
    batch_ramp_ms: float = (
        0.3  # and briefly before each batch (a turn change leaves it idle ~1-3 ms)
    )
    profile: list[str] = field(default_factory=list)
    # Per shape label: the most calls per batch that fit in memory (memory_plan.py).
    batch_caps: dict[str, int] = field(default_factory=dict)

    def most_per_batch(self, device: str) -> int:
        """The most calls the rounds time in one batch by themselves (a fifth of the
        calls per shape): the memory plan's largest batch."""
        return max(1, (self.reps if device == "cuda" else self.cpu_reps) // 5)


@dataclass(frozen=True)
class Evidence:
    """A slot timed for the record only (bench.py: the reference under torch.compile).
    `job`: what its worker's job adds (the entry, the `compile` spec); `budget_s`: the
    most its `prepare` (the first call, which compiles, and the warm-up) may take on one
    shape, `total_s` on all shapes together — past either it is dropped, never waited for."""

    job: dict
    budget_s: float = 120.0
    total_s: float = 240.0


@dataclass
class Problem:
    category: str  # timing | tamper | protocol | compile | crash | timeout
    slot: str  # whose doing: interference is the candidate's, a wrong output its producer's
    text: str


@dataclass
class SlotResult:
    samples_ms: list[float]
    method: str
    hidden_calls: int
    total_ms: float
    profiler_ms: float | None = None
    round_size: int = 1  # timed units per round (the batch size)
    per_unit: int = 1  # calls per timed unit (graph replays)


@dataclass
class Outcome:
    env: dict = field(default_factory=dict)  # a non-candidate worker's hello: device, versions
    mode: str = "not run"
    shapes: dict[str, dict[str, SlotResult]] = field(default_factory=dict)
    reported_s: dict[str, float] = field(default_factory=dict)
    observed_s: dict[str, float] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    log_tail: str = ""
    timing_phase_s: float | None = None
    # Where the benchmark's wall time went (Session.phase), seconds summed over shapes: the
    # OUTER_PHASES one after another; inside "rounds", "audit" (of which "audit_fetch":
    # the worker writing the output and this process reading it) and "through"; and
    # "turns"/"turn_s", how many single-worker commands ran and their time; "audits" and
    # "audits_via_slot", how many outputs were audited and how many of them came through
    # a shared output slot (trusted/channel/inbox.py) instead of a file. What the
    # record's `phases_s` shows (issue 13: what to cut).
    phases_s: dict[str, float] = field(default_factory=dict)
    idle: dict = field(default_factory=dict)  # idle-probe calibrations and worst probes (GPU)
    stray_killed: int = 0
    # Evidence slots: why each one dropped out; per shape, how long its `prepare` (the
    # first call, which compiles, and the warm-up) took on the trusted clock.
    dropped: dict[str, str] = field(default_factory=dict)
    prepare_s: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per shape: what the trusted clock saw of the candidate (bench_record.ClockView).
    clock: dict[str, object] = field(default_factory=dict)


OUTER_PHASES = (
    "start",
    "calibrate",
    "load",
    "prepare",
    "rough",
    "method",
    "rounds",
    "end",
    "profile",
    "stop",
)


class _Abort(Exception):
    pass


@contextlib.contextmanager
def _one_thread(cuda: bool):
    """CPU checks in this process on one thread: with the workers' load on a small machine,
    torch's intra-op threads spin (a 256x1024 comparison took 0.5 s on 2 threads, 0.02 s on 1)."""
    before = torch.get_num_threads()
    if not cuda:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if not cuda:
            torch.set_num_threads(before)


class RoundsHost(Protocol):
    """What the run-through rounds (through.py) use of the benchmark's session
    (interleave.Session): named here so that through.py needs no import of the session
    that calls it."""

    candidate: str
    out: Outcome
    workers: dict[str, Any]
    cal: dict[str, Any]

    def core(self) -> list[str]: ...

    def left(self, cap: float) -> float: ...

    def problem(self, category: str, slot: str, text: str) -> None: ...

    def held(self, w: Any, act: Callable[[], T]) -> tuple[T, float]: ...

    def _audit(
        self, call: Call, slot: str, seed: int, key: int, commits: list[str], j: int
    ) -> bool: ...
