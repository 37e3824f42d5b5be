"""What a run carries from round to round: the user's options, the run itself (`Run`),
the best so far, and what one evaluation and one proposal came to. Records, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kernelloop.agents.base import Agent, Proposal
from kernelloop.evaluate.trusted.clock.bench_record import BenchmarkRecord
from kernelloop.evaluate.trusted.values.record import EvaluationRecord
from kernelloop.executor import Executor, InTurn
from kernelloop.gate import GateResult
from kernelloop.history import HistoryStore
from kernelloop.task import Task
from kernelloop.versions import Versions


@dataclass
class Options:
    device: str = "auto"
    shapes: str | None = None
    dtypes: list[str] | None = None
    rounds: int | None = None
    resume: bool = False
    workspace: Path | None = None
    sandbox: str = "auto"
    allow_unsandboxed: bool = False  # promote a best whose evaluation ran with --sandbox none
    executor: Executor | None = None  # who runs a round's evaluations (None: in turn)
    compiled: bool = False  # every benchmark also times the reference under torch.compile
    # Nsight Compute profile of each new best (off: the agent reads compile facts only).
    profile: bool = True
    # A model agent's next proposals are requested while the round is judged (driver.py).
    overlap: bool = False


@dataclass
class Evaluated:
    """One candidate's evaluation: the correctness record, and where timings count the
    benchmark record, the gate's verdict and the per-shape table. `infrastructure` says
    why no verdict could be had through no fault of the candidate ("" when the verdict
    stands); `record` is None when the sandbox never started."""

    record: EvaluationRecord | None
    bench: BenchmarkRecord | None = None  # where timings count
    gate: GateResult | None = None
    shapes: list[dict] = field(default_factory=list)
    infrastructure: str = ""
    slot: str = ""  # where it ran ("gpu1", "slot0"): every time in it was taken there


@dataclass
class Best:
    pid: int
    source: str
    record: EvaluationRecord | None
    objective: float  # speedup over the baseline (1.0 for the baseline, or unmeasured)
    pct_of_floor: float | None = None
    path: Path = field(default_factory=Path)
    profile_text: str = ""
    profile_metrics: dict = field(default_factory=dict)
    shapes: list[dict] = field(default_factory=list)  # per shape: time, speedup, % of floor
    # speedup over the reference under torch.compile, from the benchmark that made it the
    # best (None: not timed, or not on every shape); evidence, never the gate's
    vs_compiled: float | None = None
    vs_compiled_why: str = ""  # why vs_compiled is None (compiled_why), for the leaderboard


def compiled_why(bench) -> str:
    """Why a benchmark record has no speedup over torch.compile ('' when it has one): the
    compiled slot's own reason (left out and not timed in turn, recompiled, differed from
    eager), or that it was not asked for or nothing was timed."""
    if bench is None:
        return "no benchmark of the best"
    if bench.speedup_vs_compiled is not None:
        return ""
    if bench.compiled is None:
        return "not asked for (--compiled)"
    return bench.compiled.dropped or "not timed on every shape, or the benchmark had problems"


@dataclass
class Outcome:
    """What one proposal came to: its history row and place in the round (k); the gain
    over the round's starting best when the gate accepted it; the new best if it was the
    round's winner; `infrastructure` when it could not be evaluated through no fault of
    its own."""

    pid: int
    gain: float | None = None
    best: Best | None = None
    infrastructure: bool = False
    k: int = 0


class View(Protocol):
    """Where a run shows itself (`loop.view.RunView`, or the MCP server's stderr view)."""

    def start(self, task: Task, agent_name: str, device: str, best: Best | None) -> None: ...
    def set_best(self, best: Best) -> None: ...
    def close(self) -> None: ...
    def status(self, message: str) -> None: ...
    def candidate(
        self, r: int, k: int, prop: Proposal, state: str, note: str, stages: str = ""
    ) -> None: ...
    def round_done(self, r: int, best: Best, gain: float) -> None: ...
    def finish(self, summary: dict) -> None: ...


@dataclass
class Run:
    """One run as its rounds need it: the task, its two memories (history, git versions),
    who proposes, where it shows, and how candidates are evaluated. `id` and `arch` are set
    when round 0 records the run; `gains` is the stall rule's memory, one per measured round."""

    task: Task
    store: HistoryStore
    versions: Versions
    agent: Agent
    view: View
    scratch: Path  # candidate files for the sandboxed workers
    device: str
    measured: bool  # whether timings count here (a GPU, or a plain-PyTorch task on a CPU)
    sandbox: str = "auto"
    shapes: str | None = None
    dtypes: list[str] | None = None
    allow_unsandboxed: bool = False
    compiled: bool = False  # benchmarks also time the reference under torch.compile
    profile: bool = True  # Nsight Compute profile of each new best
    id: int = 0
    arch: str = ""
    round_now: int = 0  # the round being played (a Ctrl-C is recorded against it)
    gains: list[float] = field(default_factory=list)
    # Who runs the evaluations of a round (in turn on the one device, or one per GPU).
    executor: Executor = field(default_factory=InTurn)
