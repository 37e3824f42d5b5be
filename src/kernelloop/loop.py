"""The closed loop: profile → hypothesis → edit → test → benchmark → gate → record → repeat.

Reads like the seed's loop; every detail lives in a part (evaluate, policy, history,
versions, agents, objective). State is written after every step, so a killed run
continues with `--resume` and loses at most the evaluation in flight.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelloop.agents.base import Agent, AgentContext, Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.bench import BenchmarkRecord, benchmark
from kernelloop.evaluate.record import EvaluationRecord, Verdict
from kernelloop.evaluate.run import evaluate, resolve_device, timings_count
from kernelloop.gate import GateResult, decide
from kernelloop.history import open_task_memory
from kernelloop.loop_state import gains_before, stored_best
from kernelloop.objective import weighted_geomean
from kernelloop.policy import (
    bound_check,
    budget_check,
    check_proposal,
    edit_points,
    new_arch_guard,
    refusals,
    rules_text,
    stall_check,
)
from kernelloop.runview import RunView, context_profile, floor_pct, shape_table
from kernelloop.task import Task


@dataclass
class Options:
    device: str = "auto"
    shapes: str | None = None
    dtypes: list[str] | None = None
    rounds: int | None = None
    resume: bool = False
    workspace: Path | None = None
    sandbox: str = "auto"


@dataclass
class Evaluated:
    record: EvaluationRecord
    bench: BenchmarkRecord | None = None  # GPU only
    gate: GateResult | None = None
    shapes: list[dict] = field(default_factory=list)


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
    shapes: list[dict] = field(default_factory=list)  # per shape: time, speedup over baseline, % of floor


def _profile(task: Task, store, best: Best, parent: Path | None, device: str, sandbox: str, view) -> None:
    """Nsight Compute summary of the new best (compile facts where there is no GPU profiler)."""
    from kernelloop.profile.run import profile_candidate

    view.status("profiling the best")
    try:
        outcome = profile_candidate(task, best.path, parent=parent, device=device, sandbox=sandbox,
                                    progress=view.status)
    except KernelloopError as e:
        best.profile_text = context_profile(best.record) + f"\nProfiler unavailable: {e}"
        return
    best.profile_text = outcome.report.format_for_prompt()
    best.profile_metrics = outcome.report.agent_metrics()
    # The full metrics (every kernel, hints, roofline) are kept with the proposal's record.
    store.add_profile(best.pid, best.profile_text, {"agent_metrics": best.profile_metrics,
                                                    "report": outcome.report.to_record()})


def run_loop(task: Task, agent: Agent, opts: Options, view: RunView) -> dict:
    """Run (or with opts.resume, continue) the loop; returns the run summary."""
    scratch = Path(tempfile.mkdtemp(prefix="kernelloop-run-"))  # candidate files for the sandboxed workers
    try:
        return _run_loop(task, agent, opts, view, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_loop(task: Task, agent: Agent, opts: Options, view: RunView, scratch: Path) -> dict:
    store, versions = open_task_memory(task, opts.workspace)
    rules, device = task.spec.rules, resolve_device(opts.device)
    # Speed counts on a GPU, and on the CPU for tasks written in plain PyTorch; never
    # from Triton's interpreter.
    measured = timings_count(device, False, task.spec.task.language)
    t0, gains, status, why = time.monotonic(), [], "finished", "all rounds done"
    state = store.find_resumable_run(task.name) if opts.resume else None
    if opts.resume and state is None:
        raise KernelloopError(f"no unfinished run of {task.name} to resume; start one with `kernelloop run {task.folder}`.")
    if state and state.task_digest != task.digest():
        raise KernelloopError("the task folder changed since the run started; start a new run instead of --resume.")

    def evaluate_source(source: str, name: str, best: Best | None) -> Evaluated:
        """Correctness in the sandbox, then (GPU only) the benchmark against the best and the gate."""
        path = scratch / f"{name}.py"
        path.write_text(source)
        view.status(f"checking {name}")
        record = evaluate(task, path, device=device, shapes=opts.shapes, dtypes=opts.dtypes,
                          sandbox=opts.sandbox, progress=view.status, timing=False)
        if not record.verdict.accepted or not measured:
            return Evaluated(record)
        view.status(f"benchmarking {name}")
        bench = benchmark(task, path, best=best.path if best else None, device=device, shapes=opts.shapes,
                          dtype=(opts.dtypes or task.spec.dtypes)[0], sandbox=opts.sandbox, progress=view.status)
        gate = decide(record, bench, task.spec.rules)
        return Evaluated(record, bench, gate, shape_table(bench, gate))

    if state is None:  # round 0: the baseline, evaluated, versioned and recorded like any variant
        source = task.baseline_path.read_text()
        ev = evaluate_source(source, "baseline", None)
        record = ev.record
        if not record.verdict.accepted:
            raise KernelloopError(f"the task's baseline fails its own checks ({'; '.join(record.verdict.reasons[:2])}); fix the task first.")
        arch = record.environment.compute_capability or record.environment.device
        run_id = store.start_run(task.name, task.digest(), agent.name, record.environment.device_name, arch,
                                 json.dumps({"device": device, "shapes": opts.shapes, "rounds": opts.rounds}))
        pid = store.add_proposal(run_id, 0, source=source, hypothesis="baseline", agent="baseline")
        base_variant = versions.commit_baseline(run_id, source)
        store.set_commit(pid, base_variant.commit, base_variant.branch)
        versions.set_best(base_variant.commit, "baseline")
        store.add_evaluation(pid, record, objective=1.0, per_shape={s.label: 1.0 for s in task.shapes_for(device)},
                             bench=ev.bench, gate=ev.gate)
        store.set_best(run_id, pid)
        best = Best(pid, source, record, 1.0, floor_pct(task, ev.shapes), scratch / "baseline.py",
                    shapes=ev.shapes)
        _profile(task, store, best, None, device, opts.sandbox, view)
        first_round = 1
    else:
        run_id, arch = state.run_id, state.arch
        best = Best(state.best_proposal_id or 0, state.best_source or "", None, state.best_objective or 1.0)
        best.record, best.shapes, best.pct_of_floor = stored_best(task, store, best.pid)
        if measured:
            gains = gains_before(store, run_id, state.next_round)
        best.path = scratch / "best.py"
        best.path.write_text(best.source)
        _profile(task, store, best, None, device, opts.sandbox, view)
        first_round = state.next_round
    view.start(task, agent.name, device, best)
    # What the agent proposed before the kill, by source: a replaying agent (scripted, the
    # tuner) proposes it again from its start and is moved past it, not charged a round.
    replayed: dict[str, list] = {}
    if state is not None:
        for a in (a for a in state.in_flight if a.round > 0):  # the evaluation lost to the kill, redone on its own row
            prop = Proposal(source=a.source, hypothesis=a.hypothesis, predicted_effect=a.predicted_effect,
                            direction=a.direction, agent=a.agent, model=a.model, attribution=a.attribution)
            gain = _one_proposal(task, store, versions, agent, view, run_id, a.round, a.k, prop, best,
                                 evaluate_source, arch, pid=a.id)
            if gain is not None:
                parent, best = best.path, gain[1]
                _profile(task, store, best, parent, device, opts.sandbox, view)
        done = store.run_state(run_id)
        for a in done.attempts:
            if a.round > 0:
                replayed.setdefault(a.source, []).append(a)
        if first_round in {a.round for a in done.attempts}:
            # The round the kill interrupted has all its recorded proposals decided now.
            store.finish_round(run_id, first_round, "resumed")
            first_round += 1

    last_round = min(rules.max_rounds, opts.rounds or rules.max_rounds)
    for r in range(first_round, last_round + 1):
        if stop := budget_check(r - 1, _spent(agent), time.monotonic() - t0, rules):
            status, why = stop.status, stop.reason
            break
        store.start_round(run_id, r)
        ctx = AgentContext(
            task_name=task.name, task_description=task.spec.task.description, language=task.spec.task.language,
            entry=task.spec.task.entry, best_source=best.source, best_id=str(best.pid),
            profile_summary=best.profile_text or context_profile(best.record), history_digest=store.digest(task.name),
            rules_text=rules_text(rules, task.spec.task.entry), round_index=r, rounds_left=last_round - r + 1,
            tunables=tuple(task.spec.task.tunables), device_name=best.record.environment.device_name if best.record else "",
            best_objective=best.objective, profile_metrics=dict(best.profile_metrics),
        )
        proposals = _skip_replayed(agent, ctx, replayed)
        _record_model_calls(store, agent, run_id, r)
        if not proposals:
            status, why = "finished", "the agent has nothing left to propose"
            store.finish_round(run_id, r, why)
            break
        round_gain = 0.0
        for k, prop in enumerate(proposals, start=1):
            gain = _one_proposal(task, store, versions, agent, view, run_id, r, k, prop, best, evaluate_source, arch)
            if gain is not None:
                round_gain = max(round_gain, gain[0])
                parent, best = best.path, gain[1]
                _profile(task, store, best, parent, device, opts.sandbox, view)
        store.finish_round(run_id, r)
        view.round_done(r, best, round_gain)
        if not measured:
            continue  # interpreter timings: no gain is measurable, so the stall rule cannot apply
        gains.append(round_gain)
        if stop := stall_check(gains, rules, best.pct_of_floor) or bound_check(best.pct_of_floor, rules):
            status, why = stop.status, stop.reason
            break
    if not measured:
        why += "; speed was not measured (interpreter timings never count), so nothing was promoted"
    summary = view.summary(task, store, run_id, best, status, why, time.monotonic() - t0)
    store.finish_run(run_id, status, json.dumps(summary))
    return summary


def _skip_replayed(agent: Agent, ctx: AgentContext, replayed: dict[str, list]) -> list[Proposal]:
    """The agent's proposals, less those this run recorded before it was killed (each
    skipped once, its recorded outcome told to the agent); asks again while every one
    was skipped, so a replaying agent catches up without spending rounds."""
    while True:
        proposals, fresh = agent.propose(ctx), []
        for prop in proposals:
            if not replayed.get(prop.source):
                fresh.append(prop)
                continue
            a = replayed[prop.source].pop(0)
            if a.status == "refused":
                agent.observe(prop, f"refused before evaluation: {a.refused_reason}")
            else:
                agent.observe(prop, f"{'accepted' if a.was_best else 'rejected'}: {'; '.join(a.reasons)}")
        if fresh or not proposals:
            return fresh


def _one_proposal(task, store, versions, agent, view, run_id, r, k, prop: Proposal, best: Best, evaluate_source, arch,
                  pid: int | None = None):
    """Check, version, evaluate and gate one proposal; returns (gain, new best) if it wins.
    `pid`: the proposal is already recorded (in flight when a killed run died)."""
    rules = task.spec.rules
    decisions = check_proposal(rules, best.source, prop.source, task.spec.task.entry)
    try:
        n_edits = len(edit_points(best.source, prop.source))
    except (SyntaxError, ValueError):
        n_edits = None
    if pid is None:
        pid = store.add_proposal_from(run_id, r, prop, k=k, parent_id=best.pid, edit_points=n_edits)
    refused = [d.reason for d in refusals(decisions)]
    # A repeat of an idea already measured is the most useful thing to tell the agent, so
    # it leads even when a policy rule refuses the proposal as well (on the H200 a
    # rejected idea re-sent against a new best was refused only for its edit count).
    if dup := store.check_duplicate(task.name, prop.source, prop.hypothesis, best.pid):
        refused.insert(0, dup.message)
    if refused:
        store.refuse_proposal(pid, "; ".join(refused))
        agent.observe(prop, f"refused before evaluation: {'; '.join(refused)}")
        view.candidate(r, k, prop, "refused", refused[0])
        return None
    variant = versions.commit_variant(run_id, r, k, prop.source, prop.hypothesis, proposal_id=pid)
    store.set_commit(pid, variant.commit, variant.branch)
    view.candidate(r, k, prop, "evaluating", "")
    ev = evaluate_source(prop.source, f"r{r}_{k}", best)
    record, gate = ev.record, ev.gate
    if gate is None:  # rejected for correctness, or correct on a device whose timings never count
        accepted, reasons = False, (record.verdict.reasons[:3] if not record.verdict.accepted else
                                    ["correct, but timings on this device do not count (interpreter): "
                                     "a speedup can only be accepted from GPU measurements"])
        per_shape, objective = {}, None
        verdict = None
    else:
        accepted, reasons = gate.accepted, gate.reasons or [f"{gate.objective:.3f}x over the best"]
        per_shape = {g.shape: g.speedup_vs_baseline for g in gate.shapes if g.speedup_vs_baseline}
        objective = weighted_geomean(task, per_shape)
        verdict = Verdict(accepted=gate.accepted, category=gate.category if gate.category != "no_record" else "timing",
                          reasons=reasons)
    store.add_evaluation(pid, record, objective=objective, per_shape=per_shape, verdict=verdict,
                         bench=ev.bench, gate=gate)
    word = "accepted" if accepted else "rejected"
    agent.observe(prop, f"{word}: {'; '.join(reasons)}")
    shown = "correct, unmeasured" if record.verdict.accepted and gate is None else word
    view.candidate(r, k, prop, shown, "; ".join(reasons)[:160])
    if not accepted:
        return None
    pending = new_arch_guard(store.arch_experience(arch).get("approvals", 0), rules)
    store.set_best(run_id, pid, pending_approval=pending,
                   reason="new architecture: needs `kernelloop approve`" if pending else "new best")
    if not pending:
        versions.set_best(variant.commit)
    new = Best(pid, prop.source, record, objective or best.objective,
               floor_pct(task, ev.shapes), best.path.with_name(f"best_{pid}.py"), shapes=ev.shapes)
    new.path.write_text(prop.source)
    return (gate.objective or 1.0) - 1.0, new


def _spent(agent: Agent) -> float:
    """Model spend so far (0 for agents without a cost ledger: tuner, scripted)."""
    ledger = getattr(agent, "ledger", None)
    total = getattr(ledger, "total_usd", 0.0)
    return float(total() if callable(total) else total)


def _record_model_calls(store, agent: Agent, run_id: int, r: int) -> None:
    """Copy this round's model calls from the agent's cost ledger into the history."""
    ledger = getattr(agent, "ledger", None)
    for e in getattr(ledger, "entries", []):
        if e.round == r:
            store.add_model_call(run_id, r, e.model, e.provider, e.input_tokens, e.output_tokens,
                                 e.cost_usd, e.latency_s)
