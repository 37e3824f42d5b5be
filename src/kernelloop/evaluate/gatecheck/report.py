"""What `gate_check()` returns: each mutant's and equivalent's outcome and the rates.

No exclusion (issue 45, class 7): a mutant the gate accepts is a **survivor** and counts
against the kill rate unless it is *proven* equivalent. Where the oracle (oracle.py) accepts
it too, it is still a survivor, marked `task_finding`: the task's inputs cannot tell it apart
from the original, a finding about the task ("strengthen the task"), never a reason to
leave it out. Only a known equivalence (the mutant's source is one of equivalents.py's
rewrites) makes a mutant `equivalent`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

TASK_FINDING = "the task's inputs cannot tell it apart: strengthen the task"


class MutantResult(BaseModel):
    operator: str
    line: int
    description: str
    diff: str
    # stillborn: the compiler itself failed on it (the worker reports the exception raised
    # at the build step, by type and place, never by its text); not_judged: its evaluation
    # failed twice through no act of the kernel (INFRASTRUCTURE); equivalent: proven the
    # same kernel (a known equivalence). None of these counts in the kill rate; not_judged
    # fails the check (`meets`).
    outcome: Literal["killed", "survived", "equivalent", "stillborn", "not_judged"]
    category: str = Field(description="the gate's verdict category")
    killed_by: str | None = Field(
        default=None,
        description="the suite of the first failed check, else the verdict's category "
        "(crash, static, timeout, ...)",
    )
    reasons: list[str] = Field(default_factory=list)
    oracle: str | None = Field(default=None, description="the oracle's verdict, survivors only")
    task_finding: bool = Field(
        default=False,
        description="a survivor the oracle accepts too: the task's inputs cannot tell it "
        "apart (strengthen the task); it still counts as survived",
    )
    wall_s: float


class EquivalentResult(BaseModel):
    operator: str
    line: int
    description: str
    diff: str
    accepted: bool
    category: str
    reasons: list[str] = Field(default_factory=list)
    wall_s: float
    judged: bool = Field(
        default=True,
        description="False: its evaluation failed twice on the trusted side (infrastructure); "
        "not counted as a rejection, and the check does not stand",
    )


class GateCheckReport(BaseModel):
    task: str
    kernel: str
    device: str
    dtypes: list[str]
    sandbox: str
    sample_seed: int
    excluded: list[str] = Field(
        default_factory=list, description="descriptions the caller left out (--exclude)"
    )
    mutants_generated: int
    equivalents_generated: int
    mutants: list[MutantResult]
    equivalents: list[EquivalentResult]
    killed: int
    survived: int = Field(description="every survivor, task findings included")
    task_findings: int = Field(
        default=0,
        description="survivors the oracle accepts too (counted in `survived`): the task's "
        "inputs cannot tell them apart",
    )
    equivalent: int = Field(default=0, description="mutants proven equivalent (not counted)")
    stillborn: int = 0
    not_judged: int = Field(
        default=0, description="mutants and equivalents the trusted side failed to judge twice"
    )
    kill_rate: float | None = Field(
        description="killed / (killed + survived), task findings counted as survived; None "
        "when no mutant counts"
    )
    false_rejections: int
    false_reject_rate: float | None
    oracle_note: str = ""
    weak_inputs: str = Field(default="", description="regions no input case informs")
    wall_s: float

    def meets(self, min_kill: float, max_false_reject: float) -> bool:
        """Thresholds hold; a check with no counted mutant or no equivalent proves nothing
        and fails, and so does one with a mutant or equivalent left unjudged."""
        return (
            self.not_judged == 0
            and self.kill_rate is not None
            and self.kill_rate >= min_kill
            and self.false_reject_rate is not None
            and self.false_reject_rate <= max_false_reject
        )
