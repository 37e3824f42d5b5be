"""What `kernelloop run --resume` needs to continue a run as if it had not stopped: which
run (one that crashed, never one still live), the best's records and per-shape numbers,
the stall rule's gains, the evaluation lost to the kill, and the proposals a replaying
agent will send again. Also the guard every new run passes: no other live run of the
task (two writers would fight over the task's best)."""

from __future__ import annotations

import json

from pydantic import ValidationError

from kernelloop.agents.base import Agent, AgentContext, Proposal
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.bench_record import BenchmarkRecord
from kernelloop.evaluate.trusted.record import EvaluationRecord
from kernelloop.gate import GateResult
from kernelloop.history import HistoryStore
from kernelloop.history.liveness import liveness
from kernelloop.history.models import Attempt, RunState
from kernelloop.loop.round import adopt, one_proposal, profile_best
from kernelloop.loop.state import Best, Run
from kernelloop.objective import floor_pct, shape_table
from kernelloop.task import Task


def refuse_if_live(task: Task, store: HistoryStore) -> None:
    """A new run may not start while another process runs one of the same task."""
    for info in store.unfinished_runs(task.name):
        if (alive := liveness(info)).live:
            raise KernelloopError(
                f"run {info.id} of {task.name} is still live ({alive.why}); wait for it to "
                "end or stop that process before starting another run of this task."
            )


def resumable_run(task: Task, store: HistoryStore) -> RunState:
    """The latest unfinished run of the task that `kernelloop run` drove and whose process
    is gone; a clear error for every other case."""
    skipped_mcp = None
    for info in reversed(store.unfinished_runs(task.name)):
        if (alive := liveness(info)).live:
            raise KernelloopError(
                f"run {info.id} of {task.name} is still live ({alive.why}); it needs no "
                "--resume: wait for it, or stop that process and then resume."
            )
        state = store.run_state(info.id)
        if state.driver == "mcp":
            skipped_mcp = skipped_mcp or info.id
            continue
        if state.task_digest != task.digest():
            raise KernelloopError(
                "the task folder changed since the run started; start a new run instead of "
                "--resume."
            )
        return state
    hint = (
        f" (run {skipped_mcp} was an external agent's `kernelloop mcp` session, which cannot "
        "be continued by another agent)"
        if skipped_mcp
        else ""
    )
    raise KernelloopError(
        f"no unfinished run of {task.name} to resume{hint}; start one with "
        f"`kernelloop run {task.folder}`."
    )


def restore(run: Run, state: RunState) -> Best:
    """The run and its best as they were: records, per-shape numbers, the stall rule's
    gains (where timings count), and a fresh profile of the best."""
    run.id, run.arch = state.run_id, state.arch
    best = Best(
        state.best_proposal_id or 0, state.best_source or "", None, state.best_objective or 1.0
    )
    best.record, best.shapes, best.pct_of_floor = stored_best(run.task, run.store, best.pid)
    if run.measured:
        run.gains = gains_before(run.store, run.id, state.next_round)
    best.path = run.scratch / "best.py"
    best.path.write_text(best.source)
    profile_best(run, best, None)
    return best


def stored_best(
    task: Task, store: HistoryStore, pid: int
) -> tuple[EvaluationRecord | None, list[dict], float | None]:
    """(correctness record, per-shape table, weighted % of floor) of a recorded proposal;
    what is missing (an older history, a run that never benchmarked) comes back empty."""
    record, shapes = None, []
    try:
        if text := store.record_json(pid):
            record = EvaluationRecord.model_validate_json(text)
        bench, gate = store.bench_json(pid), store.gate_json(pid)
        if bench and gate:
            shapes = shape_table(
                BenchmarkRecord.model_validate_json(bench), GateResult.model_validate_json(gate)
            )
    except ValidationError:
        return record, [], None
    return record, shapes, floor_pct(task, shapes)


def gains_before(store: HistoryStore, run_id: int, before_round: int) -> list[float]:
    """Per finished round of the run, the best gain over the best that any of its proposals
    achieved (0 for a round without an accepted one): the stall rule's memory. A round
    whose every proposal was lost to the infrastructure measured nothing and is skipped,
    as play_round skips it."""
    per_round: dict[int, float] = {}
    measured: set[int] = set()
    for a in store.run_state(run_id).attempts:
        if not 0 < a.round < before_round:
            continue
        gain = 0.0
        if a.accepted and (gate := store.gate_json(a.id)):
            gain = float(json.loads(gate).get("objective") or 1.0) - 1.0
        per_round[a.round] = max(per_round.get(a.round, 0.0), gain)
        if a.status != "infrastructure":
            measured.add(a.round)
    return [per_round[r] for r in sorted(per_round) if r in measured]


def catch_up(run: Run, state: RunState, best: Best) -> tuple[Best, int, dict[str, list[Attempt]]]:
    """Redo the evaluation lost to the kill (on its own recorded row) and close the round it
    interrupted. Returns the best, the first round still to play, and what the run recorded
    before the kill by source: a replaying agent (scripted, the tuner) proposes it again
    from its start and is moved past it, not charged a round."""
    for a in (a for a in state.in_flight if a.round > 0):
        prop = Proposal(
            source=a.source,
            hypothesis=a.hypothesis,
            predicted_effect=a.predicted_effect,
            direction=a.direction,
            agent=a.agent,
            model=a.model,
            attribution=a.attribution,
        )
        won = one_proposal(run, a.round, a.k, prop, best, pid=a.id)
        best = adopt(run, best, won)
    replayed: dict[str, list[Attempt]] = {}
    done = run.store.run_state(run.id)
    for a in done.attempts:
        if a.round > 0:
            replayed.setdefault(a.source, []).append(a)
    first_round = state.next_round
    if first_round in {a.round for a in done.attempts}:
        # The round the kill interrupted has all its recorded proposals decided now.
        run.store.finish_round(run.id, first_round, "resumed")
        first_round += 1
    return best, first_round, replayed


def skip_replayed(
    agent: Agent, ctx: AgentContext, replayed: dict[str, list[Attempt]]
) -> list[Proposal]:
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
            agent.observe(prop, _recorded_outcome(a))
        if fresh or not proposals:
            return fresh


def _recorded_outcome(a: Attempt) -> str:
    if a.status == "refused":
        return f"refused before evaluation: {a.refused_reason}"
    if a.status == "infrastructure":
        return f"not evaluated: an infrastructure failure ({a.infra_reason}); it may be sent again"
    return f"{'accepted' if a.was_best else 'rejected'}: {'; '.join(a.reasons)}"
