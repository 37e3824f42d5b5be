"""The run summary: what a finished (or stopped) run leaves behind, as JSON, in the
history and in `TASK/.kernelloop/run-N-summary.json`. Built from the history and the
best, never from what a screen happened to show."""

from __future__ import annotations

import datetime as dt

from kernelloop.history import HistoryStore
from kernelloop.history.models import history_row
from kernelloop.loop.state import Best
from kernelloop.task import Task


def run_summary(
    task: Task, store: HistoryStore, run_id: int, best: Best, status: str, why: str, wall_s: float
) -> dict:
    """Status and reason, the best's objective and % of floor, its per-shape table, every
    proposal of the run (history rows) and the model cost ledger. `wall_s`: this process's
    stretch; the summary's `wall_s` is the run's whole running time, every earlier stretch
    (ended by a Ctrl-C or a crash, history `interruptions`) added, the stops left out."""
    stops = store.interruptions(run_id)
    earlier = [i["ran_s"] for i in stops if i.get("ran_s") is not None]
    summary = {
        "task": task.name,
        "run_id": run_id,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "status": status,
        "reason": why,
        "best_proposal_id": best.pid,
        "best_objective_vs_baseline": best.objective,
        "best_pct_of_floor": best.pct_of_floor,
        # evidence beside the objective: the same candidate against the reference under
        # torch.compile, timed in the same benchmark (None where it was not)
        "best_speedup_vs_compiled": best.vs_compiled,
        "best_compiled_why": best.vs_compiled_why,  # why None, in one sentence
        "wall_s": round(wall_s + sum(earlier), 1),
        "wall_s_last_stretch": round(wall_s, 1),
        "interruptions": len(stops),
        # a stop whose stretch's running time is not known leaves `wall_s` short
        "wall_s_complete": len(earlier) == len(stops),
        "attempts": [
            history_row(a) for a in store.attempts(task.name, run_id=run_id) if a.round > 0
        ],
        "model_costs": store.cost_by_model(run_id),
    }
    if best.record is not None:
        summary["timings_count"] = best.record.timings_count
    if best.shapes:
        summary["best_per_shape"] = best.shapes
    return summary
