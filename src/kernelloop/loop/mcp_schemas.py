"""The MCP tools' output schemas (pydantic models the SDK publishes as each tool's
`outputSchema`) and their parameter descriptions. Light on purpose: `kernelloop mcp`
imports this before the session (torch and all), so a client connects at once.

The models name and describe the fields a client reads; `extra="allow"` keeps every other
field the session returns (a history row's full set, the task's facts)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# ---- parameter descriptions ------------------------------------------------------------
SOURCE = (
    "The candidate: the complete Python source file defining the task's entry function "
    "with the baseline's signature (see `task`: entry_signature). In a cuda task, a C++/CUDA "
    "source binding the entry with PYBIND11_MODULE, taking the baseline's arguments in order, "
    "is accepted too."
)
CLAIM = "What you changed and why it should be faster (required; it is the history's hypothesis)."
PREDICTION = 'The effect you expect to measure, e.g. "1.3x on 16384x8192; DRAM bytes -40%".'
DIRECTION = "A one-line name for the kind of change (fusion, rng, tiling, …); the history shows it."
PARENT = (
    "Optional: the id (from `history`) of an earlier candidate judged correct to start from "
    "instead of the current best; edit points and the duplicate check are counted against "
    "it. The gate still compares the result with the current best."
)
LIMIT = "How many of the latest history rows to return (the digest covers all of them)."
PROFILE_SOURCE = (
    "A candidate source file to profile against the current best; leave it out for the "
    "profile of the current best. Costs no round, but one of the run's profiles."
)
REF = "A proposal id from `history`, 'best', or a git revision of the task's versions."


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunState(_Open):
    run_id: int | None = Field(None, description="the run's id; None before round 0")
    rounds_used: int = Field(description="rounds spent so far")
    rounds_left: int = Field(description="rounds the budget still allows")
    profiles_left: int | None = Field(None, description="profiles of sources still allowed")
    status: str = Field(description="not started | running | finished | needs review | …")
    reason: str = Field("", description="why the run stopped, once it has")


class BestState(_Open):
    id: int | None = Field(description="the best's proposal id; None before round 0")
    objective_vs_baseline: float | None = Field(
        None, description="weighted geomean speedup over the baseline"
    )
    pct_of_floor: float | None = Field(None, description="% of the roofline floor")
    per_shape: list[dict[str, Any]] | None = Field(
        None, description="the best's row per shape: speedup, % of floor, times"
    )
    source: str | None = Field(None, description="the best's source (the `task` tool only)")
    what: str | None = Field(None, description="before round 0: what the best will be")


class ShapeInfo(_Open):
    shape: str = Field(description='the shape label, e.g. "16384x8192"')
    weight: float = Field(description="its weight in the objective's geometric mean")
    tag: str = ""


class TaskInfo(_Open):
    contract: str = Field(description="the task's contract, as the loop's own agents read it")
    task: str
    description: str = Field(description="the task's description, in its author's words")
    language: str
    entry: str = Field(description="the entry function a candidate defines")
    entry_signature: str
    params: dict[str, Any] = Field(description="the entry's fixed keyword arguments")
    device: str = Field(description="where candidates are judged: cuda | cpu")
    timings_count: bool = Field(description="False: correctness only, nothing is promoted")
    shapes: list[ShapeInfo] = Field(description="the shapes judged in this run")
    dtypes: list[str] = Field(description="the dtypes judged in this run")
    tolerances: dict[str, dict[str, Any]] = Field(description="per dtype: atol, rtol")
    tunables: list[str] = Field(description="the module constants a tuner may vary")
    rules: str = Field(description="the policy rules in words")
    baseline_source: str
    best: BestState
    run: RunState


class _Row(_Open):
    """A history row (history/models.history_row), every field optional."""

    id: int | None = None
    run: int | None = Field(None, description="the run's id")
    round: int | None = None
    k: int | None = Field(None, description="its place among its round's proposals")
    parent: int | None = Field(None, description="the proposal it was counted against")
    agent: str = ""
    model: str = ""
    direction: str = ""
    claim: str = ""
    prediction: str = ""
    status: str = Field("", description="proposed | refused | evaluated | infrastructure")
    verdict: str = Field(
        "", description='the outcome word (docs/loop.md): "promoted", "rejected [wrong]", …'
    )
    accepted: bool | None = None
    category: str | None = Field(None, description="the verdict's category (wrong, slower, …)")
    reasons: list[str] = Field(default_factory=list)
    refused_reason: str | None = None
    infra_reason: str | None = None
    objective_vs_baseline: float | None = None
    gain_vs_parent: float | None = None
    per_shape_vs_baseline: dict[str, float] | None = None
    commit: str | None = None
    branch: str | None = None
    cost_usd: float | None = None
    was_best: bool | None = None


class HistoryRow(_Row):
    id: int
    round: int


class History(_Open):
    digest: str = Field(description="what the loop's agents get each round")
    attempts: list[HistoryRow]


class Submission(_Row):
    verdict: str = Field(
        description="the outcome (docs/loop.md, 'Outcomes'): promoted | judged correct, not "
        "promoted | judged correct, not timed | rejected [CATEGORY] | refused | not evaluated | "
        "unparsable (the free retry: no round spent)"
    )
    id: int | None = Field(None, description="the proposal's history id; None when unparsable")
    outcome: str = Field(description="the feedback the loop's agents get, compile facts included")
    round_spent: bool = Field(True, description="False only for the free retry of unusable source")
    new_best: bool = False
    pending_approval: bool = False
    best: BestState | None = None
    run: RunState | None = None


class Profile(_Open):
    of: str = Field(description='"best #N" or "candidate"')
    summary: str = Field(description="the profile summary text")


class Variant(_Open):
    ref: str
    commit: str
    source: str
    attempt: dict[str, Any] | None = None
