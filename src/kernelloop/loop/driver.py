"""The closed loop: profile → hypothesis → edit → test → benchmark → gate → record → repeat.

Reads like the seed's loop; every detail lives in a part (the round, evaluate, policy,
history, versions, agents, objective). State is written after every step, so a killed
run continues with `--resume` and loses at most the evaluation in flight; while it runs,
its row carries this process's pid and a heartbeat, so a live run is never resumed twice.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kernelloop.agents.base import Agent
from kernelloop.evaluate.trusted.run import resolve_device, timings_count
from kernelloop.history import HistoryStore, open_task_memory
from kernelloop.history.heartbeat import Heartbeat
from kernelloop.history.models import RunState
from kernelloop.loop.context import agent_context
from kernelloop.loop.overlap import Ahead, overlaps
from kernelloop.loop.resume import (
    catch_up,
    refuse_if_live,
    restore,
    resumable_run,
    skip_replayed,
    take_up,
)
from kernelloop.loop.round import UNMEASURED, play_round, start_run
from kernelloop.loop.state import Best, Options, Run, View
from kernelloop.loop.summary import run_summary
from kernelloop.policy import budget_check
from kernelloop.task import Task


def run_loop(task: Task, agent: Agent, opts: Options, view: View) -> dict:
    """Run (or with opts.resume, continue) the loop; returns the run summary."""
    scratch = Path(tempfile.mkdtemp(prefix="kernelloop-run-"))
    store, versions = open_task_memory(task, opts.workspace)
    device = resolve_device(opts.device)
    # Speed counts on a GPU, and on the CPU for tasks written in plain PyTorch; never
    # from Triton's interpreter.
    measured = timings_count(device, False, task.spec.task.language)
    run = Run(task, store, versions, agent, view, scratch, device, measured)
    run.sandbox, run.shapes, run.dtypes = opts.sandbox, opts.shapes, opts.dtypes
    run.allow_unsandboxed, run.compiled = opts.allow_unsandboxed, opts.compiled
    run.profile = opts.profile
    if opts.executor is not None:
        run.executor = opts.executor
    try:
        return _run(run, opts)
    finally:
        store.close()
        shutil.rmtree(scratch, ignore_errors=True)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run: `run_id` (0: in the baseline round, before anything was
    recorded) stays unfinished for `--resume`, its interruption in the history."""

    def __init__(self, run_id: int, round_index: int) -> None:
        super().__init__(f"run {run_id} interrupted in round {round_index}")
        self.run_id, self.round = run_id, round_index


def _run(run: Run, opts: Options) -> dict:
    try:
        return _run_shown(run, opts)
    finally:
        run.view.close()


def _run_shown(run: Run, opts: Options) -> dict:
    task, store, agent, view = run.task, run.store, run.agent, run.view
    t0, started = time.monotonic(), datetime.now(UTC).isoformat(timespec="milliseconds")
    state = resumable_run(task, store) if opts.resume else None
    # The view starts before the baseline (or the resumed best) is known: its status line
    # shows their progress from the first second (issue 36: 50-80 s of blank screen).
    view.start(task, agent.name, run.device, None)
    run.round_now = state.next_round if state is not None else 0
    try:
        if state is None:  # round 0: the baseline, evaluated, versioned and recorded
            refuse_if_live(task, store)
            view.status("round 0: evaluating the baseline")
            config = {
                "device": run.device,
                "shapes": opts.shapes,
                "dtypes": opts.dtypes,
                "rounds": opts.rounds,
                "profile": opts.profile,
            }
            best = start_run(run, config)
        else:
            view.status(f"resuming run {state.run_id} at round {run.round_now}: restoring its best")
            take_up(store, state)
            best = restore(run, state)
        view.set_best(best)
        with Heartbeat(store.path, run.id, since=started):
            return _rounds(run, opts, state, best, t0)
    except KeyboardInterrupt:
        if run.id:  # the run is recorded: it stays unfinished, its stop written down
            store.add_interruption(run.id, run.round_now, ran_s=time.monotonic() - t0)
        raise RunInterrupted(run.id, run.round_now) from None


def _rounds(run: Run, opts: Options, state: RunState | None, best: Best, t0: float) -> dict:
    """Round 1 on (after a resumed run's interrupted round is caught up), until a stop rule."""
    task, store, agent, view = run.task, run.store, run.agent, run.view
    first_round, replayed, stop = 1, {}, None
    if state is not None:
        caught = catch_up(run, state, best)
        best, first_round, replayed, stop = (
            caught.best,
            caught.first_round,
            caught.replayed,
            caught.stop,
        )
    last_round = min(task.spec.rules.max_rounds, opts.rounds or task.spec.rules.max_rounds)
    status, why = (stop.status, stop.reason) if stop else ("finished", "all rounds done")
    # With a model agent and --overlap, the next round is asked for while this one is
    # judged (loop/overlap.py).
    ahead = Ahead(agent) if opts.overlap and overlaps(agent) else None
    # A model agent's feedback section tells its last round in full (from the second
    # round this process played): the digest does not say those reasons twice.
    told = run.id if getattr(agent, "candidate_profiles", False) else None
    try:
        for r in range(first_round, last_round + 1 if stop is None else first_round):
            if stop := budget_check(r - 1, _spent(agent), time.monotonic() - t0, task.spec.rules):
                status, why = stop.status, stop.reason
                break
            run.round_now = r
            store.start_round(run.id, r)
            proposals = ahead.take(r) if ahead is not None else None
            if proposals is None:
                digest = store.digest(task.name, told_run=told if r > first_round else None)
                ctx = agent_context(task, digest, best, r, last_round, run)
                proposals = skip_replayed(agent, ctx, replayed)
            _record_model_calls(store, agent, run.id, r)
            if not proposals:
                status, why = "finished", "the agent has nothing left to propose"
                store.finish_round(run.id, r, why)
                break
            if ahead is not None and r < last_round:
                nxt = agent_context(
                    task,
                    store.digest(task.name, told_run=told if r > first_round else None),
                    best,
                    r + 1,
                    last_round,
                    run,
                )
                ahead.request(nxt, proposals, r)
            played = play_round(run, r, proposals, best)
            best = played.best
            if played.stop:
                status, why = played.stop.status, played.stop.reason
                break
    except BaseException:
        if ahead is not None:
            ahead.close(wait=False)  # Ctrl-C: never wait for a model
        raise
    if ahead is not None:
        ahead.close()
        for r in ahead.requested:  # a request whose round never came was still paid for
            _record_model_calls(store, agent, run.id, r, once=True)
    if not run.measured:
        why += UNMEASURED
    summary = run_summary(task, store, run.id, best, status, why, time.monotonic() - t0)
    view.finish(summary)
    store.finish_run(run.id, status, json.dumps(summary))
    return summary


def _spent(agent: Agent) -> float:
    """Model spend so far (0 for agents without a cost ledger: tuner, scripted)."""
    ledger = getattr(agent, "ledger", None)
    total = getattr(ledger, "total_usd", 0.0)
    return float(total() if callable(total) else total)


def _record_model_calls(
    store: HistoryStore, agent: Agent, run_id: int, r: int, *, once: bool = False
) -> None:
    """Copy this round's model calls from the agent's cost ledger into the history (with
    `once`, only where none of round r's is recorded yet)."""
    ledger = getattr(agent, "ledger", None)
    if once and store.has_model_calls(run_id, r):
        return
    for e in list(getattr(ledger, "entries", [])):
        if e.round == r:
            store.add_model_call(
                run_id,
                r,
                e.model,
                e.provider,
                e.input_tokens,
                e.output_tokens,
                e.cost_usd,
                e.latency_s,
            )
