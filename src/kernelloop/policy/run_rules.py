"""Run-level rules: when the loop stops, and when a best needs a human's sign-off.

Units: a round's gain is a fraction (0.004 = 0.4% faster than the best before the
round; 0 for a round with nothing accepted). `pct_of_floor` is in percent as in
`TimingStats.pct_of_floor`: floor time / measured time × 100, so 100 is the roofline.
"""

from __future__ import annotations

from kernelloop.policy.decisions import StopDecision
from kernelloop.task.spec import Rules


def stall_check(
    gains: list[float], rules: Rules, pct_of_floor: float | None = None
) -> StopDecision | None:
    """Stop for review after `stall_rounds` consecutive rounds each under `stall_gain`."""
    n = rules.stall_rounds
    recent = gains[-n:]
    if len(recent) < n or any(g >= rules.stall_gain for g in recent):
        return None
    shown = ", ".join(f"{g:.2%}" for g in recent)
    return StopDecision(
        "needs review",
        "stall",
        f"{n} consecutive rounds each gained under {rules.stall_gain:.1%} ({shown}); "
        f"{_floor_distance(pct_of_floor)}; a person should decide whether further work is worth "
        "it.",
    )


def _floor_distance(pct_of_floor: float | None) -> str:
    if pct_of_floor is None or pct_of_floor <= 0:
        return "the distance to the roofline floor is unknown (no floor or no timing)"
    return (
        f"the best runs at {pct_of_floor:.1f}% of the roofline floor, "
        f"{100.0 / pct_of_floor:.2f}x the minimal time"
    )


def bound_check(pct_of_floor: float | None, rules: Rules) -> StopDecision | None:
    """Stop once the best is within `bound_fraction` of the roofline floor."""
    target = rules.bound_fraction * 100.0
    if pct_of_floor is None or pct_of_floor < target:
        return None
    return StopDecision(
        "bound reached",
        "bound",
        f"the best runs at {pct_of_floor:.1f}% of the roofline floor, at or past the "
        f"{target:.0f}% the task sets as the bound; little is left to win.",
    )


def budget_check(
    rounds_done: int, cost_usd: float, wall_s: float, rules: Rules
) -> StopDecision | None:
    """Stop when the rounds, model spend or wall-time cap of the task is used up."""
    if rounds_done >= rules.max_rounds:
        return StopDecision(
            "budget exhausted",
            "max_rounds",
            f"all {rules.max_rounds} rounds the task allows are done; raise rules.max_rounds or "
            "pass --rounds to continue.",
        )
    if rules.max_cost_usd is not None and cost_usd >= rules.max_cost_usd:
        return StopDecision(
            "budget exhausted",
            "max_cost_usd",
            f"model spend ${cost_usd:.2f} reached the task's cap of ${rules.max_cost_usd:.2f}; "
            "raise rules.max_cost_usd to continue.",
        )
    if rules.max_wall_s is not None and wall_s >= rules.max_wall_s:
        return StopDecision(
            "budget exhausted",
            "max_wall_s",
            f"the run has taken {wall_s:.0f} s, reaching the task's cap of "
            f"{rules.max_wall_s:.0f} s; raise rules.max_wall_s to continue.",
        )
    return None


def new_arch_guard(approved_runs_on_arch: int, rules: Rules) -> bool:
    """True when the best must stay "pending approval": too few approved runs on this GPU
    architecture."""
    return approved_runs_on_arch < rules.approvals_for_new_arch


def pending_approval_reason(arch: str, approved_runs_on_arch: int, rules: Rules) -> str:
    """The sentence shown with a best held by `new_arch_guard`."""
    return (
        f"{arch} has {approved_runs_on_arch} approved run(s) in the history and the task asks for "
        f"{rules.approvals_for_new_arch} before trusting results on it; the best is pending "
        "approval until a person runs `kernelloop approve`."
    )


def rules_text(rules: Rules, entry: str) -> str:
    """The rules as an agent should read them (AgentContext.rules_text)."""
    lines = [
        f"- At most {rules.max_edit_points} edit points per proposal (changed regions of the diff "
        "against the current best; comments, blank lines and docstrings do not count). Larger "
        "proposals are refused without being measured.",
        f"- Do not change the signature of `{entry}` (parameter names, order, kinds, defaults)."
        if rules.interface_lock
        else f"- The signature of `{entry}` may change, but callers' outputs must still match "
        "the reference.",
        "- You may fuse or split kernels."
        if rules.allow_fusion_change
        else "- Do not change the number of kernel launches per call (no fusing or splitting "
        "kernels).",
        f"- A candidate must be at least {rules.min_gain:.1%} faster than the current best beyond "
        "noise, and correct on every shape, dtype and extreme-value case.",
        f"- No shape may get more than {rules.max_shape_regression:.0%} slower than the current "
        "best.",
        f"- The run stops after {rules.stall_rounds} rounds in a row each under "
        f"{rules.stall_gain:.1%} gain, or at {rules.bound_fraction:.0%} of the roofline floor.",
    ]
    return "\n".join(lines)


def unsandboxed_hold(sandboxes: list[str], allowed: bool) -> str:
    """Why a would-be best is held for a person's approval because it ran without a sandbox
    ("" when it ran sandboxed, or the user passed --allow-unsandboxed): a plain process
    could have changed the task, the history or the timings it is judged by."""
    if allowed or "none" not in sandboxes:
        return ""
    return (
        "it was evaluated without a sandbox (--sandbox none); the best is pending approval "
        "until a person runs `kernelloop approve`, or the run is started with --allow-unsandboxed"
    )
