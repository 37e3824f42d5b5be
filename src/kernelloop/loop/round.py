"""One round of the loop, shared by `kernelloop run` (driver.py) and `kernelloop mcp`
(session.py): round 0 (the baseline), and a round's proposals — several ideas at once —
each recorded, checked, versioned and evaluated against the same starting best, the best
accepted one promoted at the round's end, then the stop rules of a measured round.
Whoever proposes — the loop's agent or an external coding agent — goes through exactly
this code, so the gate has one implementation."""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace

from kernelloop.agents.base import Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.values.record import Verdict
from kernelloop.evaluate.trusted.values.refcache import References
from kernelloop.evaluate.trusted.values.stages import summary as stage_summary
from kernelloop.history.models import (
    ACCEPTED,
    NOT_EVALUATED,
    NOT_PROMOTED,
    NOT_TIMED,
    REFUSED,
    REJECTED,
)
from kernelloop.loop.context import context_profile
from kernelloop.loop.evaluation import collect, evaluate_source, submit
from kernelloop.loop.feedback import candidate_profile, outcome_text, wants_profile
from kernelloop.loop.promotion import decide_round, promote
from kernelloop.loop.state import Best, Evaluated, Outcome, Run, compiled_why
from kernelloop.objective import floor_pct, weighted_geomean
from kernelloop.policy import (
    StopDecision,
    bound_check,
    check_proposal,
    edit_points,
    refusals,
    stall_check,
)
from kernelloop.profile.render import prompt_text

# Appended to the stop reason of a run whose timings never count.
UNMEASURED = "; speed was not measured (interpreter timings never count), so nothing was promoted"
# The reason of a correct candidate where timings never count (its outcome: NOT_TIMED).
CORRECT_UNMEASURED = (
    "timings on this device do not count (interpreter): a speedup can only be promoted "
    "from GPU measurements"
)


@dataclass
class RoundResult:
    best: Best
    gain: float  # the winner's gain over the round's starting best (0 if none was accepted)
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
        vs_compiled=ev.bench.speedup_vs_compiled if ev.bench else None,
        vs_compiled_why=compiled_why(ev.bench),
    )
    profile_best(run, best, None)
    return best


# What the agent reads in place of a profile when the run was started with --no-profile.
PROFILE_OFF = "Nsight Compute profile: off for this run (--no-profile); compile facts only."


def profile_best(run: Run, best: Best, parent: Best | None) -> None:
    """Nsight Compute summary of the new best, against the best it beat (compile facts
    where there is no GPU profiler)."""
    from kernelloop.profile.run import profile_candidate

    if not run.profile:
        best.profile_text = context_profile(best.record) + f"\n{PROFILE_OFF}"
        return
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
    best.profile_text = prompt_text(outcome.report)
    best.profile_metrics = outcome.report.agent_metrics()
    # The full metrics (every kernel, hints, roofline) are kept with the proposal's record.
    run.store.add_profile(
        best.pid,
        best.profile_text,
        {"agent_metrics": best.profile_metrics, "report": outcome.report.to_record()},
    )


def adopt(run: Run, best: Best, new: Best | None) -> Best:
    """The best after a round: its winner replaces it, profiled against the best it beat."""
    if new is None:
        return best
    profile_best(run, new, best)
    return new


@dataclass
class Entry:
    """A proposal of the round on its way: its place (k), its history row, why it was
    refused (empty: it goes to evaluation), and what the agent is told at the round's end."""

    k: int
    prop: Proposal
    pid: int
    refused: list[str] = field(default_factory=list)
    told: str = ""


def play_round(
    run: Run,
    r: int,
    proposals: list[Proposal],
    best: Best,
    screened: list[list[str]] | None = None,
) -> RoundResult:
    """Round r: every proposal recorded first (so a kill mid-round leaves the whole round
    to resume), each checked against the round's starting best, the survivors versioned
    and handed to the executor together, each verdict recorded as it comes in; then the
    round's winner promoted and the stall and bound rules applied (`close_round`).
    `screened`: per proposal, the static screen's findings where the caller screened
    before the round (`kernelloop mcp`); any refuses it like a policy rule."""
    run.store.start_round(run.id, r)
    entries = record_round(run, r, proposals, best, screened)
    judge(run, r, [e for e in entries if not e.refused], best)
    return close_round(run, r, best, entries)


def record_round(
    run: Run,
    r: int,
    proposals: list[Proposal],
    best: Best,
    screened: list[list[str]] | None = None,
) -> list[Entry]:
    """Record each proposal with its pre-check refusals (the same source twice in one round
    is refused the second time; the screen's findings, where given, lead); the refused are
    told at once."""
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for k, prop in enumerate(proposals, start=1):
        pid, refused = _prechecks(run, r, k, prop, best)
        prop = replace(prop, proposal_id=pid)
        if screened is not None and not prop.refused:
            refused[:0] = screened[k - 1]
        if not prop.refused and (first := seen.setdefault(prop.source, pid)) != pid:
            refused.insert(0, f"the same source as candidate #{first} of this round")
        entries.append(Entry(k, prop, pid, refused))
    for e in entries:
        if e.refused:
            _refuse(run, r, e)
    return entries


def judge(run: Run, r: int, entries: list[Entry], best: Best) -> None:
    """Version each entry and hand its evaluation to the run's executor, at most
    `executor.slots` at a time, recording each verdict as soon as it is in (in turn: one
    evaluated, recorded, then the next; in parallel: whichever finishes first), so a kill
    loses only the evaluations in flight. The round waits for all of them before the
    gate's round decision (`close_round`). This thread is the only writer of the history
    and the versions: jobs only evaluate, wherever they run."""
    pending: dict[Future[Evaluated], Entry] = {}
    references = References()  # this round's secret seeds, fresh; its candidates share them
    for e in entries:
        while len(pending) >= max(1, run.executor.slots):
            _record_finished(run, r, pending, best)
        variant = run.versions.commit_variant(
            run.id, r, e.k, e.prop.source, e.prop.hypothesis, proposal_id=e.pid
        )
        run.store.set_commit(e.pid, variant.commit, variant.branch)
        run.view.candidate(r, e.k, e.prop, "evaluating", "")
        pending[submit(run, e.prop.source, f"r{r}_{e.k}", best, references)] = e
    while pending:
        _record_finished(run, r, pending, best)


def _record_finished(run: Run, r: int, pending: dict[Future[Evaluated], Entry], best: Best) -> None:
    """Wait for at least one evaluation in flight; record every finished one (in the order
    proposed) and drop it from `pending`."""
    done, _ = wait(pending, return_when=FIRST_COMPLETED)
    for future in sorted(done, key=lambda f: pending[f].k):
        _record_outcome(run, r, pending.pop(future), collect(future), f"#{best.pid}", best)


def _record_outcome(
    run: Run, r: int, e: Entry, ev: Evaluated, best_label: str, parent: Best | None = None
) -> None:
    if ev.infrastructure or ev.record is None:
        run.store.mark_infrastructure(e.pid, ev.infrastructure)
        e.told = (
            f"not evaluated: an infrastructure failure, not the candidate's "
            f"fault ({ev.infrastructure}); it may be sent again"
        )
        run.view.candidate(r, e.k, e.prop, NOT_EVALUATED, ev.infrastructure)
        return
    accepted, _, reasons = _record_verdict(run, e.pid, ev)
    correct_untimed = ev.record.verdict.accepted and ev.gate is None
    if correct_untimed:
        word = NOT_TIMED
    elif accepted:
        word = ACCEPTED
    else:
        category = ev.gate.category if ev.gate is not None else ev.record.verdict.category
        word = f"{REJECTED} [{category}]"
    e.told = outcome_text(word, reasons, ev, best_label)
    if parent is not None and wants_profile(run, ev):
        run.view.status(f"profiling candidate {r}.{e.k} for its feedback")
        e.told += "\n" + candidate_profile(run, e.prop.source, f"r{r}_{e.k}", parent, e.pid)
    run.view.candidate(r, e.k, e.prop, word, "; ".join(reasons), stage_line(ev))


def stage_line(ev: Evaluated) -> str:
    """Where the candidate's judging time went, for the live view: each correctness
    stage that ran, then the gate's benchmark where there was one."""
    line = stage_summary(ev.record.stages) if ev.record is not None else ""
    if ev.bench is not None:
        line += f"{' · ' if line else ''}timing {ev.bench.wall_s:.1f} s"
    return line


def close_round(run: Run, r: int, best: Best, entries: list[Entry], note: str = "") -> RoundResult:
    """The round's winner (read back from the history, so a resumed round decides the
    same), promoted and profiled; every evaluated candidate's outcome told to the agent;
    the round closed; after a measured round, the stall and bound rules."""
    decision = decide_round(run.store, run.task, run.id, r)
    new = promote(run, decision, best) if decision.winner is not None else None
    result = RoundResult(best, decision.gain)
    by_pid = {a.id: a for a in decision.attempts}
    for e in entries:
        if e.refused:
            result.outcomes.append(Outcome(e.pid, k=e.k))
            continue
        a = by_pid[e.pid]
        won = new is not None and e.pid == new.pid
        if e.pid in decision.gains and not won:
            assert decision.winner is not None
            e.told = (
                f"{NOT_PROMOTED}: candidate #{decision.winner.id} of "
                f"this round gained more ({decision.gain:+.1%} against "
                f"{decision.gains[e.pid]:+.1%}); {e.told.partition(': ')[2]}"
            )
        if e.told:
            run.agent.observe(e.prop, e.told)
        result.outcomes.append(
            Outcome(
                e.pid,
                decision.gains.get(e.pid),
                new if won else None,
                a.status == "infrastructure",
                e.k,
            )
        )
    result.best = adopt(run, best, new)
    run.store.finish_round(run.id, r, note)
    run.view.round_done(r, result.best, result.gain)
    # A round whose every proposal was lost to the infrastructure measured nothing and is
    # not a flat round (resume.gains_before reads the history the same way).
    if run.measured and any(a.status != "infrastructure" for a in decision.attempts):
        rules, pct = run.task.spec.rules, result.best.pct_of_floor
        run.gains.append(result.gain)
        result.stop = stall_check(run.gains, rules, pct) or bound_check(pct, rules)
    return result


def _refuse(run: Run, r: int, e: Entry) -> None:
    run.store.refuse_proposal(e.pid, "; ".join(e.refused))
    run.agent.observe(e.prop, f"refused before evaluation: {'; '.join(e.refused)}")
    run.view.candidate(r, e.k, e.prop, REFUSED, e.refused[0])


def _prechecks(run: Run, r: int, k: int, prop: Proposal, best: Best) -> tuple[int, list[str]]:
    """Record the proposal and return its id with every reason to refuse it before
    evaluation: a parent that is no correct earlier candidate, policy rules, and a repeat
    of an idea already judged. Edit points and the policy's edit rules count against the
    proposal's parent: the current best, or the correct earlier candidate it names
    (`Proposal.parent`); the gate compares with the current best all the same."""
    entry = run.task.spec.task.entry
    parent_id, parent_source, refused = best.pid, best.source, []
    if prop.refused:  # the agent could not read it as a candidate: recorded, then refused
        pid = run.store.add_proposal_from(run.id, r, prop, k=k, parent_id=parent_id)
        return pid, [prop.refused]
    if prop.parent and prop.parent != str(best.pid):
        choices = run.store.correct_sources(run.task.name, limit=1_000_000)
        if prop.parent.isdigit() and int(prop.parent) in choices:
            parent_id, parent_source = int(prop.parent), choices[int(prop.parent)]
        else:
            allowed = ", ".join(f"#{i}" for i in sorted({*choices, best.pid})[-12:])
            refused.append(
                f"parent #{prop.parent} is not an earlier candidate of this task judged correct; "
                f"name one of {allowed}, or none to start from the current best"
            )
    decisions = check_proposal(run.task.spec.rules, parent_source, prop.source, entry)
    try:
        n_edits = len(edit_points(parent_source, prop.source))
    except (SyntaxError, ValueError):
        n_edits = None
    pid = run.store.add_proposal_from(
        run.id, r, prop, k=k, parent_id=parent_id, edit_points=n_edits
    )
    refused += [d.reason for d in refusals(decisions)]
    # A repeat of an idea already judged is the most useful thing to tell the agent, so
    # it leads even when a policy rule refuses the proposal as well (on the H200 a
    # rejected idea re-sent against a new best was refused only for its edit count).
    if dup := run.store.check_duplicate(
        run.task.name, prop.source, prop.hypothesis, parent_id, measured=run.measured
    ):
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
