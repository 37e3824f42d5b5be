"""One step of the loop, shared by `kernelloop run` and the MCP server (`kernelloop mcp`):
round 0 (the baseline) and one proposal checked, versioned, evaluated, gated, recorded and
promoted. Whoever proposes — the loop's agent or an external coding agent — goes through
exactly this code, so the gate has one implementation."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelloop.agents.base import Agent, Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.bench import BenchmarkRecord, benchmark
from kernelloop.evaluate.trusted.record import EvaluationRecord, Verdict
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.gate import GateResult, decide
from kernelloop.objective import weighted_geomean
from kernelloop.policy import check_proposal, edit_points, new_arch_guard, refusals
from kernelloop.runview import context_profile, floor_pct, shape_table
from kernelloop.task import Task


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


@dataclass
class Outcome:
    """What one proposal came to: its history row, and the gain and new best if it won."""

    pid: int
    gain: float | None = None
    best: Best | None = None


Evaluator = Callable[[str, str, "Best | None"], Evaluated]


def make_evaluator(task: Task, device: str, measured: bool, scratch: Path, *, shapes: str | None,
                   dtypes: list[str] | None, sandbox: str, view) -> Evaluator:
    """evaluate_source(source, name, best): correctness in the sandbox, then (where timings
    count) the benchmark against the best and the gate. The source is written to a file for
    the sandboxed worker; this process never imports it."""

    def evaluate_source(source: str, name: str, best: Best | None) -> Evaluated:
        path = scratch / f"{name}.py"
        path.write_text(source)
        view.status(f"checking {name}")
        record = evaluate(task, path, device=device, shapes=shapes, dtypes=dtypes,
                          sandbox=sandbox, progress=view.status, timing=False)
        if not record.verdict.accepted or not measured:
            return Evaluated(record)
        view.status(f"benchmarking {name}")
        bench = benchmark(task, path, best=best.path if best else None, device=device, shapes=shapes,
                          dtype=(dtypes or task.spec.dtypes)[0], sandbox=sandbox, progress=view.status)
        gate = decide(record, bench, task.spec.rules)
        return Evaluated(record, bench, gate, shape_table(bench, gate))

    return evaluate_source


def profile_best(task: Task, store, best: Best, parent: Path | None, device: str, sandbox: str, view) -> None:
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


def adopt(task: Task, store, best: Best, won, device: str, sandbox: str, view) -> Best:
    """The best after one proposal: a winner replaces it, profiled against the best it beat."""
    if won.best is None:
        return best
    profile_best(task, store, won.best, best.path, device, sandbox, view)
    return won.best


# Appended to the stop reason of a run whose timings never count.
UNMEASURED = "; speed was not measured (interpreter timings never count), so nothing was promoted"


def start_run(task: Task, store, versions, agent_name: str, device: str, config: dict,
              evaluate_source: Evaluator, scratch: Path) -> tuple[int, str, Best]:
    """Round 0: the baseline, evaluated, versioned and recorded like any variant; it must
    pass its own checks. Returns (run id, architecture, best)."""
    source = task.baseline_path.read_text()
    ev = evaluate_source(source, "baseline", None)
    record = ev.record
    if not record.verdict.accepted:
        raise KernelloopError(f"the task's baseline fails its own checks ({'; '.join(record.verdict.reasons[:2])}); fix the task first.")
    arch = record.environment.compute_capability or record.environment.device
    run_id = store.start_run(task.name, task.digest(), agent_name, record.environment.device_name, arch,
                             json.dumps(config))
    pid = store.add_proposal(run_id, 0, source=source, hypothesis="baseline", agent="baseline")
    base_variant = versions.commit_baseline(run_id, source)
    store.set_commit(pid, base_variant.commit, base_variant.branch)
    versions.set_best(base_variant.commit, "baseline")
    store.add_evaluation(pid, record, objective=1.0, per_shape={s.label: 1.0 for s in task.shapes_for(device)},
                         bench=ev.bench, gate=ev.gate)
    store.set_best(run_id, pid)
    best = Best(pid, source, record, 1.0, floor_pct(task, ev.shapes), scratch / "baseline.py", shapes=ev.shapes)
    return run_id, arch, best


def one_proposal(task, store, versions, agent: Agent, view, run_id, r, k, prop: Proposal, best: Best,
                 evaluate_source: Evaluator, arch, pid: int | None = None) -> Outcome:
    """Check, version, evaluate and gate one proposal; the outcome carries the gain and the
    new best if it wins. `pid`: the proposal is already recorded (in flight when a killed
    run died)."""
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
        return Outcome(pid)
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
        return Outcome(pid)
    pending = new_arch_guard(store.arch_experience(arch).get("approvals", 0), rules)
    store.set_best(run_id, pid, pending_approval=pending,
                   reason="new architecture: needs `kernelloop approve`" if pending else "new best")
    if not pending:
        versions.set_best(variant.commit)
    new = Best(pid, prop.source, record, objective or best.objective,
               floor_pct(task, ev.shapes), best.path.with_name(f"best_{pid}.py"), shapes=ev.shapes)
    new.path.write_text(prop.source)
    return Outcome(pid, (gate.objective or 1.0) - 1.0, new)
