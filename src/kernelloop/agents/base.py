"""The seam between the loop and whatever proposes kernels (a model, the tuner, a script).

An agent sees an `AgentContext` and returns `Proposal`s. It never evaluates anything
itself: every proposal goes through the same policy checks and gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent may read before proposing, as plain text and numbers."""

    task_name: str
    task_description: str
    language: str
    entry: str
    best_source: str
    best_id: str
    profile_summary: str
    history_digest: str
    rules_text: str
    round_index: int
    rounds_left: int
    tunables: tuple[str, ...] = ()
    device_name: str = ""
    # Per-shape speedup of the current best over the baseline and % of roofline floor.
    best_objective: float = 1.0
    best_pct_of_floor: dict[str, float] = field(default_factory=dict)
    # Structured profile metrics of the best (name -> value), for rule-driven agents.
    profile_metrics: dict[str, float | str] = field(default_factory=dict)
    # The task's contract in words (task/contract.py): reference, inputs and their cases,
    # shapes with weights and floors, tolerances, randomness checks, roofline, the best's
    # per-shape numbers, and where candidates are judged.
    contract: str = ""
    # Whether timings on the judged device can accept a speedup (False: correctness only).
    timings_count: bool = True
    # A `cuda` task (not a module task): the baseline entry's parameters as written and
    # their names in order, so a C++ source the agent writes can stand for a candidate
    # (task/native_source.py); empty where a C++ source cannot.
    native_params: str = ""
    native_names: tuple[str, ...] = ()
    # Earlier candidates judged correct, by proposal id ("7"), that a proposal may name as
    # its parent (`Proposal.parent`) instead of the current best: a diff is applied to it
    # and edit points are counted against it; the gate still compares with the best.
    parents: dict[str, str] = field(default_factory=dict)
    # With model latency overlapped with judging (loop/driver.py): which results this
    # context could not show yet, because they were still being judged ("" otherwise).
    unseen_note: str = ""


@dataclass(frozen=True)
class Proposal:
    """One candidate: a full source file, with the agent's claim about it."""

    source: str
    hypothesis: str
    predicted_effect: str = ""
    direction: str = ""
    agent: str = ""
    model: str = ""
    attribution: str = ""
    parent: str = ""  # a proposal id from `AgentContext.parents`; "" = the current best
    # Why the agent's own reading of its answer found this candidate unusable (a parent
    # that may not be named, a diff that does not apply, …): the loop records it and
    # refuses it with this reason, so no candidate of an answer disappears.
    refused: str = ""
    # The history's id for it, set by the loop once recorded (None before).
    proposal_id: int | None = None


@runtime_checkable
class Agent(Protocol):
    name: str

    def propose(self, context: AgentContext) -> list[Proposal]:
        """Return zero or more proposals; an empty list means the agent has nothing left."""
        ...

    def observe(self, proposal: Proposal, outcome: str) -> None:
        """Told the outcome (verdict and measured effect, as text) of each of its proposals."""
        ...
