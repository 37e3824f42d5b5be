"""One round of the loop, shared by `kernelloop run` (driver.py) and `kernelloop mcp`
(session.py): round 0 (the baseline), and a round's proposals each checked, versioned,
evaluated, gated, recorded and promoted, then the stop rules of a measured round.
Whoever proposes — the loop's agent or an external coding agent — goes through exactly
this code, so the gate has one implementation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kernelloop.agents.base import Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.record import Verdict
from kernelloop.loop.context import context_profile
from kernelloop.loop.evaluation import evaluate_source
from kernelloop.loop.feedback import outcome_text
from kernelloop.loop.state import Best, Evaluated, Outcome, Run
from kernelloop.objective import floor_pct, weighted_geomean
from kernelloop.policy import (
    StopDecision,
    bound_check,
    check_proposal,
    edit_points,
    new_arch_guard,
    refusals,
    stall_check,
    unsandboxed_hold,
)

# Appended to the stop reason of a run whose timings never count.
UNMEASURED = "; speed was not measured (interpreter timings never count), so nothing was promoted"
CORRECT_UNMEASURED = (
    "correct, but timings on this device do not count (interpreter): "
    "a speedup can only be accepted from GPU measurements"
)


@dataclass
class RoundResult:
    best: Best
    gain: float  # the best gain over the best any proposal of the round achieved (0 if none)
    outcomes: list[Outcome] = field(default_factory=list)
    stop: StopDecision | None = None  # the stall or bound rule, after a measured round


def start_run(run: Run, config: dict) -> Best:
    """Round 0: the baseline, evaluated, versioned and recorded like any variant (it must
    pass its own checks), then profiled. Sets run.id and run.arch; returns the best."""
    task, store = run.task, run.store
    source = task.baseline_path.read_text()
    ev = evaluate_source(run, source, "baseline", None)
    if ev.infrastructure or ev.record is None:
        raise KernelloopError(
            f"the baseline could not be evaluated through no fault of its own "
            f"({ev.infrastructure}); check the sandbox and the device, then "
            "start the run again."
        )
    record = ev.record
    if not record.verdict.accepted:
        raise KernelloopError(
            f"the task's baseline fails its own checks "
            f"({'; '.join(record.verdict.reasons[:2])}); fix the task first."
        )
    run.arch = record.environment.compute_capability or record.environment.device
    run.id = store.start_run(
        task.name,
        task.digest(),
        run.agent.name,
        record.environment.device_name,
        run.arch,
        json.dumps(config),
    )
    pid = store.add_proposal(run.id, 0, source=source, hypothesis="baseline", agent="baseline")
    base_variant = run.versions.commit_baseline(run.id, source)
    store.set_commit(pid, base_variant.commit, base_variant.branch)
    run.versions.set_best(base_variant.commit, "baseline")
    store.add_evaluation(
        pid,
        record,
        objective=1.0,
        per_shape={s.label: 1.0 for s in task.shapes_for(run.device)},
        bench=ev.bench,
        gate=ev.gate,
    )
    store.set_best(run.id, pid)
    best = Best(
        pid,
        source,
        record,
        1.0,
        floor_pct(task, ev.shapes),
        run.scratch / "baseline.py",
        shapes=ev.shapes,
    )
    profile_best(run, best, None)
    return best


def profile_best(run: Run, best: Best, parent: Best | None) -> None:
    """Nsight Compute summary of the new best, against the best it beat (compile facts
    where there is no GPU profiler)."""
    from kernelloop.profile.run import profile_candidate

    run.view.status("profiling the best")
    try:
        outcome = profile_candidate(
            run.task,
            best.path,
            parent=parent.path if parent else None,
            device=run.device,
            sandbox=run.sandbox,
            progress=run.view.status,
        )
    except KernelloopError as e:
        best.profile_text = context_profile(best.record) + f"\nProfiler unavailable: {e}"
        return
    best.profile_text = outcome.report.format_for_prompt()
    best.profile_metrics = outcome.report.agent_metrics()
    # The full metrics (every kernel, hints, roofline) are kept with the proposal's record.
    run.store.add_profile(
        best.pid,
        best.profile_text,
        {"agent_metrics": best.profile_metrics, "report": outcome.report.to_record()},
    )


def adopt(run: Run, best: Best, won: Outcome) -> Best:
    """The best after one proposal: a winner replaces it, profiled against the best it beat."""
    if won.best is None:
        return best
    profile_best(run, won.best, best)
    return won.best


def play_round(run: Run, r: int, proposals: list[Proposal], best: Best) -> RoundResult:
    """Round r: every proposal through one_proposal, the best advanced by each winner, the
    round recorded; after a measured round, the stall and bound rules. A round whose every
    proposal was lost to the infrastructure measured nothing and is not a flat round."""
    run.store.start_round(run.id, r)
    result = RoundResult(best, 0.0)
    for k, prop in enumerate(proposals, start=1):
        won = one_proposal(run, r, k, prop, result.best)
        result.outcomes.append(won)
        if won.best is not None:
            result.gain = max(result.gain, won.gain or 0.0)
        result.best = adopt(run, result.best, won)
    run.store.finish_round(run.id, r)
    run.view.round_done(r, result.best, result.gain)
    if run.measured and not all(o.infrastructure for o in result.outcomes):
        rules, pct = run.task.spec.rules, result.best.pct_of_floor
        run.gains.append(result.gain)
        result.stop = stall_check(run.gains, rules, pct) or bound_check(pct, rules)
    return result


def one_proposal(
    run: Run, r: int, k: int, prop: Proposal, best: Best, pid: int | None = None
) -> Outcome:
    """Check, version, evaluate and gate one proposal; the outcome carries the gain and the
    new best if it wins. `pid`: the proposal is already recorded (in flight when a killed
    run died)."""
    pid, refused = _prechecks(run, r, k, prop, best, pid)
    if refused:
        run.store.refuse_proposal(pid, "; ".join(refused))
        run.agent.observe(prop, f"refused before evaluation: {'; '.join(refused)}")
        run.view.candidate(r, k, prop, "refused", refused[0])
        return Outcome(pid)
    variant = run.versions.commit_variant(
        run.id, r, k, prop.source, prop.hypothesis, proposal_id=pid
    )
    run.store.set_commit(pid, variant.commit, variant.branch)
    run.view.candidate(r, k, prop, "evaluating", "")
    ev = evaluate_source(run, prop.source, f"r{r}_{k}", best)
    if ev.infrastructure or ev.record is None:
        run.store.mark_infrastructure(pid, ev.infrastructure)
        run.agent.observe(
            prop,
            f"not evaluated: an infrastructure failure, not the candidate's "
            f"fault ({ev.infrastructure}); it may be sent again",
        )
        run.view.candidate(r, k, prop, "infrastructure", ev.infrastructure[:160])
        return Outcome(pid, infrastructure=True)
    accepted, objective, reasons = _record_verdict(run, pid, ev)
    word = "accepted" if accepted else "rejected"
    run.agent.observe(prop, outcome_text(word, reasons, ev, f"#{best.pid}"))
    shown = "correct, unmeasured" if ev.record.verdict.accepted and ev.gate is None else word
    run.view.candidate(r, k, prop, shown, "; ".join(reasons)[:160])
    if not accepted:
        return Outcome(pid)
    rules = run.task.spec.rules
    pending = new_arch_guard(run.store.arch_experience(run.arch).get("approvals", 0), rules)
    sandboxes = [ev.record.environment.sandbox] + ([ev.bench.sandbox] if ev.bench else [])
    held = unsandboxed_hold(sandboxes, run.allow_unsandboxed)
    run.store.set_best(
        run.id,
        pid,
        pending_approval=pending or bool(held),
        reason=(
            f"unsandboxed: {held}"
            if held
            else "new architecture: needs `kernelloop approve`"
            if pending
            else "new best"
        ),
    )
    pending = pending or bool(held)
    if not pending:
        run.versions.set_best(variant.commit)
    new = Best(
        pid,
        prop.source,
        ev.record,
        objective or best.objective,
        floor_pct(run.task, ev.shapes),
        best.path.with_name(f"best_{pid}.py"),
        shapes=ev.shapes,
    )
    new.path.write_text(prop.source)
    return Outcome(pid, (ev.gate.objective or 1.0) - 1.0, new)


def _prechecks(
    run: Run, r: int, k: int, prop: Proposal, best: Best, pid: int | None
) -> tuple[int, list[str]]:
    """Record the proposal (unless it is already) and return its id with every reason to
    refuse it before evaluation: policy rules, and a repeat of an idea already measured."""
    entry = run.task.spec.task.entry
    decisions = check_proposal(run.task.spec.rules, best.source, prop.source, entry)
    try:
        n_edits = len(edit_points(best.source, prop.source))
    except (SyntaxError, ValueError):
        n_edits = None
    if pid is None:
        pid = run.store.add_proposal_from(
            run.id, r, prop, k=k, parent_id=best.pid, edit_points=n_edits
        )
    refused = [d.reason for d in refusals(decisions)]
    # A repeat of an idea already measured is the most useful thing to tell the agent, so
    # it leads even when a policy rule refuses the proposal as well (on the H200 a
    # rejected idea re-sent against a new best was refused only for its edit count).
    if dup := run.store.check_duplicate(run.task.name, prop.source, prop.hypothesis, best.pid):
        refused.insert(0, dup.message)
    return pid, refused


def _record_verdict(run: Run, pid: int, ev: Evaluated) -> tuple[bool, float | None, list[str]]:
    """Store the evaluation with its verdict; (accepted, objective over the baseline, the
    reasons the agent is told)."""
    record, gate = ev.record, ev.gate
    if gate is None:  # rejected for correctness, or correct where timings never count
        correct = record.verdict.accepted
        accepted, reasons = False, ([CORRECT_UNMEASURED] if correct else record.verdict.reasons[:3])
        per_shape, objective, verdict = {}, None, None
    else:
        accepted, reasons = gate.accepted, gate.reasons or [f"{gate.objective:.3f}x over the best"]
        per_shape = {g.shape: g.speedup_vs_baseline for g in gate.shapes if g.speedup_vs_baseline}
        objective = weighted_geomean(run.task, per_shape)
        category = gate.category if gate.category != "no_record" else "timing"
        verdict = Verdict(accepted=gate.accepted, category=category, reasons=reasons)
    run.store.add_evaluation(
        pid,
        record,
        objective=objective,
        per_shape=per_shape,
        verdict=verdict,
        bench=ev.bench,
        gate=gate,
    )
    return accepted, objective, reasons
