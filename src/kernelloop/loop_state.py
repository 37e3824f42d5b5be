"""What `kernelloop run --resume` reads back from the history to continue a run as if it
had not stopped: the best's records and per-shape numbers, and the stall rule's gains."""

from __future__ import annotations

import json

from pydantic import ValidationError

from kernelloop.evaluate.trusted.bench_record import BenchmarkRecord
from kernelloop.evaluate.trusted.record import EvaluationRecord
from kernelloop.gate import GateResult
from kernelloop.runview import floor_pct, shape_table
from kernelloop.task import Task


def stored_best(task: Task, store, pid: int) -> tuple[EvaluationRecord | None, list[dict], float | None]:
    """(correctness record, per-shape table, weighted % of floor) of a recorded proposal;
    what is missing (an older history, a run that never benchmarked) comes back empty."""
    record, shapes = None, []
    try:
        if text := store.record_json(pid):
            record = EvaluationRecord.model_validate_json(text)
        bench, gate = store.bench_json(pid), store.gate_json(pid)
        if bench and gate:
            shapes = shape_table(BenchmarkRecord.model_validate_json(bench), GateResult.model_validate_json(gate))
    except ValidationError:
        return record, [], None
    return record, shapes, floor_pct(task, shapes)


def gains_before(store, run_id: int, before_round: int) -> list[float]:
    """Per finished round of the run, the best gain over the best that any of its proposals
    achieved (0 for a round without an accepted one): the stall rule's memory."""
    per_round: dict[int, float] = {}
    for a in store.run_state(run_id).attempts:
        if not 0 < a.round < before_round:
            continue
        gain = 0.0
        if a.accepted and (gate := store.gate_json(a.id)):
            gain = float(json.loads(gate).get("objective") or 1.0) - 1.0
        per_round[a.round] = max(per_round.get(a.round, 0.0), gain)
    return [per_round[r] for r in sorted(per_round)]
