"""The typed answers policy functions give: one rule, one verdict, one sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PolicyDecision:
    """The outcome of one pre-evaluation rule for one proposal.

    `rule` is a stable identifier the loop can store and count ("edit_points",
    "fusion_lock", "interface_lock", "entry", "parse"); `reason` is a sentence a
    reviewer (and the agent, next round) can read.
    """

    allowed: bool
    rule: str
    reason: str


StopStatus = Literal["needs review", "bound reached", "budget exhausted"]


@dataclass(frozen=True)
class StopDecision:
    """Why the run ends now. `status` is what the run summary shows."""

    status: StopStatus
    rule: str
    reason: str


def refusals(decisions: list[PolicyDecision]) -> list[PolicyDecision]:
    """The decisions that refuse the proposal (empty: it may be evaluated)."""
    return [d for d in decisions if not d.allowed]
