"""What `kernelloop run --resume` needs to continue a run as if it had not stopped: which
run (one that crashed, never one still live), the best's records and per-shape numbers,
the stall rule's gains, the round the kill interrupted (its unjudged candidates judged,
its winner promoted once), and the proposals a replaying agent will send again. Also the
guard every new run passes: no other live run of the task (two writers would fight over
the task's best)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kernelloop.agents.base import Agent, AgentContext, Proposal
from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.history.liveness import liveness
from kernelloop.history.models import Attempt, RunState
from kernelloop.loop.promotion import gate_gain, stored_numbers
from kernelloop.loop.round import Entry, close_round, judge, profile_best
from kernelloop.loop.state import Best, Run, compiled_why
from kernelloop.policy import StopDecision
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


def take_up(store: HistoryStore, state: RunState) -> None:
    """`--resume` takes the run up again: a run whose owner never let go was killed (kill
    -9, a lost machine: no Ctrl-C was written down), so its stop is recorded now as a
    crash at its last heartbeat, with the stretch's running time (last heartbeat less the
    stretch's start, at most a heartbeat short); then every open stop ends now."""
    owner = state.owner
    if owner is not None:
        ran_s = None
        try:
            if owner.claimed_at:
                ran_s = (_iso(owner.heartbeat_at) - _iso(owner.claimed_at)).total_seconds()
        except ValueError:
            pass
        store.add_interruption(
            state.run_id, state.next_round, kind="crash", ran_s=ran_s, at=owner.heartbeat_at
        )
    store.mark_resumed(state.run_id)


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def restore(run: Run, state: RunState) -> Best:
    """The run and its best as they were: records, per-shape numbers, the stall rule's
    gains (where timings count), and a fresh profile of the best."""
    run.id, run.arch = state.run_id, state.arch
    best = Best(
        state.best_proposal_id or 0, state.best_source or "", None, state.best_objective or 1.0
    )
    best.record, bench, best.shapes, best.pct_of_floor = stored_numbers(
        run.task, run.store, best.pid
    )
    best.vs_compiled = bench.speedup_vs_compiled if bench else None
    best.vs_compiled_why = compiled_why(bench)
    if run.measured:
        run.gains = gains_before(run.store, run.id, state.next_round)
    best.path = run.scratch / "best.py"
    best.path.write_text(best.source)
    profile_best(run, best, None)
    return best


def gains_before(store: HistoryStore, run_id: int, before_round: int) -> list[float]:
    """Per finished round of the run, the gain of its winner over the round's starting
    best (0 for a round without an accepted candidate): the stall rule's memory. A round
    whose every proposal was lost to the infrastructure measured nothing and is skipped,
    as play_round skips it."""
    per_round: dict[int, float] = {}
    measured: set[int] = set()
    for a in store.run_state(run_id).attempts:
        if not 0 < a.round < before_round:
            continue
        gain = gate_gain(store, a.id) if a.accepted else 0.0
        per_round[a.round] = max(per_round.get(a.round, 0.0), gain)
        if a.status != "infrastructure":
            measured.add(a.round)
    return [per_round[r] for r in sorted(per_round) if r in measured]


@dataclass
class CaughtUp:
    """Where a resumed run stands once the round the kill interrupted is closed."""

    best: Best
    first_round: int  # the first round still to play
    replayed: dict[str, list[Attempt]]  # what the run recorded before the kill, by source
    stop: StopDecision | None = None  # the stall or bound rule, after the closed round


def catch_up(run: Run, state: RunState, best: Best) -> CaughtUp:
    """Finish the round the kill interrupted: its proposals recorded but not yet judged are
    versioned and evaluated on their own recorded rows (nothing is recorded twice), then
    the round is closed as an uninterrupted one is: its winner, read back from the
    history, promoted unless that was recorded before the kill. A replaying agent
    (scripted, the tuner) proposes what the run recorded again from its start and is
    moved past it (`replayed`), not charged a round."""
    first_round, stop = state.next_round, None
    in_flight = [a for a in state.in_flight if a.round > 0]
    rounds = sorted({a.round for a in in_flight} | {a.round for a in state.attempts})
    for r in (r for r in rounds if r >= state.next_round):
        entries = [Entry(a.k, _proposal(a), a.id) for a in in_flight if a.round == r]
        judge(run, r, entries, best)
        closed = close_round(run, r, best, entries, note="resumed")
        best, stop, first_round = closed.best, closed.stop, r + 1
    replayed: dict[str, list[Attempt]] = {}
    for a in run.store.run_state(run.id).attempts:
        if a.round > 0:
            replayed.setdefault(a.source, []).append(a)
    return CaughtUp(best, first_round, replayed, stop)


def _proposal(a: Attempt) -> Proposal:
    return Proposal(
        source=a.source,
        hypothesis=a.hypothesis,
        predicted_effect=a.predicted_effect,
        direction=a.direction,
        agent=a.agent,
        model=a.model,
        attribution=a.attribution,
    )


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
    if a.accepted and a.objective is not None and not a.was_best:  # gated, another won
        return (
            f"accepted by the gate but not promoted (another candidate of round {a.round} "
            f"gained more): {'; '.join(a.reasons)}"
        )
    return f"{'accepted' if a.was_best else 'rejected'}: {'; '.join(a.reasons)}"
