"""Everything the report reads, gathered from the history in one place.

The typed rows (attempts, best, pending approval) come through HistoryStore; the rest
(the run row with its summary, rounds, profiles, model calls) through a read-only
connection to the same file, so building a report never writes to the history and never
blocks a running loop (WAL readers do not). Stored JSON is read as plain dicts, like
`kernelloop export` does: a record from an older kernelloop renders whatever it has.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.history.export_bench import load
from kernelloop.history.models import Attempt


@dataclass(frozen=True)
class Stored:
    """One evaluation's stored JSON: correctness record, benchmark record, gate verdict."""

    record: dict[str, Any] | None
    bench: dict[str, Any] | None
    gate: dict[str, Any] | None


@dataclass
class RunRecords:
    task: str
    run: dict[str, Any]
    summary: dict[str, Any]
    rounds: list[dict[str, Any]]
    attempts: list[Attempt]
    stored: dict[int, Stored]
    profiles: dict[int, dict[str, Any]]  # proposal id -> the latest profile's metrics JSON
    model_calls: list[dict[str, Any]]
    best_id: int | None
    pending_id: int | None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    interruptions: list[dict[str, Any]] = field(default_factory=list)  # Ctrl-C, oldest first
    parent_source: str | None = None  # the best's parent's source (it may be another run's)

    @property
    def config(self) -> dict[str, Any]:
        """The run's settings as recorded at its start (device, shapes, dtypes, rounds)."""
        try:
            cfg = json.loads(self.run.get("config_json") or "{}")
        except ValueError:
            return {}
        return cfg if isinstance(cfg, dict) else {}

    @property
    def run_id(self) -> int:
        return int(self.run["id"])

    def attempt(self, pid: int | None) -> Attempt | None:
        return next((a for a in self.attempts if a.id == pid), None)

    @property
    def baseline(self) -> Attempt | None:
        return next((a for a in self.attempts if a.round == 0), None)

    @property
    def best(self) -> Attempt | None:
        return self.attempt(self.best_id)


def _rows(conn: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(sql, args)]


def read_run(store: HistoryStore, task_name: str, run_id: int | None = None) -> RunRecords:
    """The records of one run of the task (the latest when run_id is None)."""
    runs = store.runs(task_name)
    if not runs:
        raise KernelloopError(
            f"the history in {store.path} has no run of task {task_name}; "
            "run `kernelloop run TASK` first or pass --workspace where the run wrote it."
        )
    if run_id is None:
        run_id = runs[-1].id
    elif run_id not in {r.id for r in runs}:
        raise KernelloopError(
            f"task {task_name} has no run {run_id}; pick one of "
            f"{', '.join(str(r.id) for r in runs)} (`kernelloop history` lists them)."
        )
    attempts = store.attempts(task_name, run_id=run_id)
    stored = {
        a.id: Stored(
            load(store.record_json(a.id)), load(store.bench_json(a.id)), load(store.gate_json(a.id))
        )
        for a in attempts
        if a.evaluated
    }
    pending = store.pending_best(task_name)
    conn = sqlite3.connect(
        f"{store.path.resolve().as_uri()}?mode=ro", uri=True
    )  # as_uri escapes ? and #
    conn.row_factory = sqlite3.Row
    try:
        run = _rows(conn, "SELECT * FROM runs WHERE id = ?", run_id)[0]
        rounds = _rows(conn, "SELECT * FROM rounds WHERE run_id = ? ORDER BY round", run_id)
        profiles: dict[int, dict[str, Any]] = {}
        for r in _rows(
            conn,
            "SELECT f.proposal_id, f.metrics_json FROM profiles f JOIN proposals p "
            "ON p.id = f.proposal_id WHERE p.run_id = ? ORDER BY f.id",
            run_id,
        ):
            profiles[r["proposal_id"]] = load(r["metrics_json"]) or {}
        calls = _rows(conn, "SELECT * FROM model_calls WHERE run_id = ? ORDER BY id", run_id)
        approvals = _rows(
            conn,
            "SELECT a.* FROM approvals a JOIN proposals p ON p.id = a.proposal_id "
            "WHERE p.run_id = ? ORDER BY a.id",
            run_id,
        )
        try:
            stops = _rows(
                conn,
                "SELECT * FROM interruptions WHERE run_id = ? ORDER BY id",  # kind, ran_s: v5
                run_id,
            )
        except sqlite3.OperationalError:  # a history from before interruptions were kept
            stops = []
    finally:
        conn.close()
    best = next((a for a in attempts if a.id == run.get("best_proposal_id")), None)
    parent_source = None
    if best is not None and best.parent_id is not None:
        try:
            parent_source = store.source_of(best.parent_id)
        except (KernelloopError, LookupError, TypeError):
            parent_source = None
    try:
        summary = json.loads(run.get("summary_json") or "{}")
    except ValueError:
        summary = {}
    return RunRecords(
        task=task_name,
        run=run,
        summary=summary if isinstance(summary, dict) else {},
        rounds=rounds,
        attempts=attempts,
        stored=stored,
        profiles=profiles,
        model_calls=calls,
        best_id=run.get("best_proposal_id"),
        pending_id=pending.id if pending and pending.run_id == run_id else None,
        approvals=approvals,
        interruptions=stops,
        parent_source=parent_source,
    )
