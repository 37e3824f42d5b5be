"""The rules of a run, enforced: budgets, edit points, fusion and interface locks,
stall and bound stops, the new-architecture guard.

Every function takes the task's `Rules` plus plain data and returns a typed decision
with a reason sentence; nothing here evaluates a candidate or touches the history.
"""

from kernelloop.policy.decisions import PolicyDecision, StopDecision, refusals
from kernelloop.policy.edits import DEFAULT_MERGE_GAP, EditPoint, edit_points
from kernelloop.policy.proposal import check_edit_points, check_launch_count, check_proposal
from kernelloop.policy.run_rules import (
    bound_check,
    budget_check,
    new_arch_guard,
    pending_approval_reason,
    rules_text,
    stall_check,
    unsandboxed_hold,
)
from kernelloop.policy.static import LaunchCount, Signature, count_launches, signature_of

__all__ = [
    "DEFAULT_MERGE_GAP",
    "EditPoint",
    "LaunchCount",
    "PolicyDecision",
    "Signature",
    "StopDecision",
    "bound_check",
    "budget_check",
    "check_edit_points",
    "check_launch_count",
    "check_proposal",
    "count_launches",
    "edit_points",
    "new_arch_guard",
    "unsandboxed_hold",
    "pending_approval_reason",
    "refusals",
    "rules_text",
    "signature_of",
    "stall_check",
]
