"""The end of a round: of the candidates the gate accepted, the one with the largest gain
over the round's starting best wins (ties: the earlier candidate) and is promoted, under
the approval rules (a new architecture, an unsandboxed evaluation).

Everything is read back from the history, never from memory, so a round resumed after a
kill decides exactly as it would have uninterrupted, and a promotion recorded before the
kill is not recorded again."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from kernelloop.evaluate.trusted.clock.bench_record import BenchmarkRecord
from kernelloop.evaluate.trusted.values.record import EvaluationRecord
from kernelloop.gate import GateResult
from kernelloop.history import HistoryStore
from kernelloop.history.models import Attempt
from kernelloop.loop.state import Best, Run, compiled_why
from kernelloop.objective import floor_pct, shape_table
from kernelloop.policy import new_arch_guard, unsandboxed_hold
from kernelloop.task import Task


@dataclass(frozen=True)
class Decision:
    """A round's verdict as a whole: its winner (None: no candidate was accepted), the
    winner's gain over the round's starting best, and every accepted candidate's gain."""

    winner: Attempt | None
    gain: float
    gains: dict[int, float]  # proposal id -> gain over the round's starting best
    attempts: list[Attempt]


def round_attempts(store: HistoryStore, task: Task, run_id: int, r: int) -> list[Attempt]:
    return [a for a in store.attempts(task.name, run_id) if a.round == r]


def gate_gain(store: HistoryStore, pid: int) -> float:
    """The gate's speedup over the best the candidate was timed against, minus one."""
    gate = store.gate_json(pid)
    return float(json.loads(gate).get("objective") or 1.0) - 1.0 if gate else 0.0


def gate_accepted(store: HistoryStore, pid: int) -> bool:
    """Whether the gate accepted the candidate. A correct candidate whose timings do not
    count (the interpreter) has a correct evaluation but no gate verdict: never a winner."""
    gate = store.gate_json(pid)
    return bool(gate and json.loads(gate).get("accepted"))


def decide_round(store: HistoryStore, task: Task, run_id: int, r: int) -> Decision:
    attempts = round_attempts(store, task, run_id, r)
    gains = {
        a.id: gate_gain(store, a.id)
        for a in attempts
        if a.accepted and a.status == "evaluated" and gate_accepted(store, a.id)
    }
    if not gains:
        return Decision(None, 0.0, {}, attempts)
    winner = max((a for a in attempts if a.id in gains), key=lambda a: (gains[a.id], -a.k, -a.id))
    return Decision(winner, gains[winner.id], gains, attempts)


def promote(run: Run, decision: Decision, best: Best) -> Best:
    """Record the winner as the run's best (once: a round resumed after its promotion was
    recorded finds it there), move the git best unless it waits for approval, and return
    it as the new `Best`."""
    win, store = decision.winner, run.store
    assert win is not None
    record, bench, shapes, pct = stored_numbers(run.task, store, win.id)
    if not any(a.was_best for a in decision.attempts):
        rules = run.task.spec.rules
        pending = new_arch_guard(store.arch_experience(run.arch).get("approvals", 0), rules)
        sandboxes = ([record.environment.sandbox] if record else []) + (
            [bench.sandbox] if bench else []
        )
        held = unsandboxed_hold(sandboxes, run.allow_unsandboxed)
        reason = (
            f"unsandboxed: {held}"
            if held
            else "new architecture: needs `kernelloop approve`"
            if pending
            else "new best"
        )
        store.set_best(run.id, win.id, pending_approval=pending or bool(held), reason=reason)
    if store.pending_best(run.task.name) is None and win.commit_sha:
        run.versions.set_best(win.commit_sha)  # idempotent: a resumed round moves it again
    new = Best(
        win.id,
        win.source,
        record,
        win.objective or best.objective,
        pct,
        best.path.with_name(f"best_{win.id}.py"),
        shapes=shapes,
        vs_compiled=bench.speedup_vs_compiled if bench else None,
        vs_compiled_why=compiled_why(bench),
    )
    new.path.write_text(win.source)
    return new


def stored_numbers(
    task: Task, store: HistoryStore, pid: int
) -> tuple[EvaluationRecord | None, BenchmarkRecord | None, list[dict], float | None]:
    """(correctness record, benchmark record, per-shape table, weighted % of floor) of a
    recorded proposal; what is missing (an older history, a run that never benchmarked)
    comes back empty."""
    record = bench = None
    shapes: list[dict] = []
    try:
        if text := store.record_json(pid):
            record = EvaluationRecord.model_validate_json(text)
        bench_text, gate_text = store.bench_json(pid), store.gate_json(pid)
        if bench_text and gate_text:
            bench = BenchmarkRecord.model_validate_json(bench_text)
            shapes = shape_table(bench, GateResult.model_validate_json(gate_text))
    except ValidationError:
        return record, None, [], None
    return record, bench, shapes, floor_pct(task, shapes)
