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
from dataclasses import dataclass
from pathlib import Path

from kernelloop.agents.base import Agent, AgentContext, Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.run import resolve_device, timings_count
from kernelloop.history import open_task_memory
from kernelloop.loop_state import gains_before, stored_best
from kernelloop.policy import bound_check, budget_check, rules_text, stall_check
from kernelloop.runview import RunView, context_profile
from kernelloop.step import (
    UNMEASURED,
    Best,
    Evaluated,
    adopt,
    make_evaluator,
    one_proposal,
    profile_best,
    start_run,
)
from kernelloop.task import Task

__all__ = ["Best", "Evaluated", "Options", "run_loop"]


@dataclass
class Options:
    device: str = "auto"
    shapes: str | None = None
    dtypes: list[str] | None = None
    rounds: int | None = None
    resume: bool = False
    workspace: Path | None = None
    sandbox: str = "auto"


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

    evaluate_source = make_evaluator(task, device, measured, scratch, shapes=opts.shapes, dtypes=opts.dtypes,
                                     sandbox=opts.sandbox, view=view)

    if state is None:  # round 0: the baseline, evaluated, versioned and recorded like any variant
        run_id, arch, best = start_run(task, store, versions, agent.name, device,
                                       {"device": device, "shapes": opts.shapes, "rounds": opts.rounds},
                                       evaluate_source, scratch)
        profile_best(task, store, best, None, device, opts.sandbox, view)
        first_round = 1
    else:
        run_id, arch = state.run_id, state.arch
        best = Best(state.best_proposal_id or 0, state.best_source or "", None, state.best_objective or 1.0)
        best.record, best.shapes, best.pct_of_floor = stored_best(task, store, best.pid)
        if measured:
            gains = gains_before(store, run_id, state.next_round)
        best.path = scratch / "best.py"
        best.path.write_text(best.source)
        profile_best(task, store, best, None, device, opts.sandbox, view)
        first_round = state.next_round
    view.start(task, agent.name, device, best)
    # What the agent proposed before the kill, by source: a replaying agent (scripted, the
    # tuner) proposes it again from its start and is moved past it, not charged a round.
    replayed: dict[str, list] = {}
    if state is not None:
        for a in (a for a in state.in_flight if a.round > 0):  # the evaluation lost to the kill, redone on its own row
            prop = Proposal(source=a.source, hypothesis=a.hypothesis, predicted_effect=a.predicted_effect,
                            direction=a.direction, agent=a.agent, model=a.model, attribution=a.attribution)
            won = one_proposal(task, store, versions, agent, view, run_id, a.round, a.k, prop, best,
                               evaluate_source, arch, pid=a.id)
            best = adopt(task, store, best, won, device, opts.sandbox, view)
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
            won = one_proposal(task, store, versions, agent, view, run_id, r, k, prop, best, evaluate_source, arch)
            if won.best is not None:
                round_gain = max(round_gain, won.gain)
            best = adopt(task, store, best, won, device, opts.sandbox, view)
        store.finish_round(run_id, r)
        view.round_done(r, best, round_gain)
        if not measured:
            continue  # interpreter timings: no gain is measurable, so the stall rule cannot apply
        gains.append(round_gain)
        if stop := stall_check(gains, rules, best.pct_of_floor) or bound_check(best.pct_of_floor, rules):
            status, why = stop.status, stop.reason
            break
    if not measured:
        why += UNMEASURED
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
