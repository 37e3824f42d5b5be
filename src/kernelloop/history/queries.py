"""Read-side queries that assemble typed rows (Attempt, RunState) from the tables."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

from kernelloop.history.duplicates import PriorProposal
from kernelloop.history.fingerprint import changed_lines
from kernelloop.history.models import Attempt, RunInfo, RunOwner, RunState

_ATTEMPTS_SQL = """
SELECT p.*, e.accepted, e.category, e.reasons_json, e.objective, e.per_shape_json,
       e.metric_deltas_json, pe.objective AS parent_objective,
       json_extract(e.record_json, '$.timings_count') AS timings_count,
       pe.per_shape_json AS parent_per_shape_json,
       EXISTS (SELECT 1 FROM best_changes b WHERE b.proposal_id = p.id) AS was_best
FROM proposals p
JOIN runs r ON r.id = p.run_id
LEFT JOIN evaluations e ON e.proposal_id = p.id
LEFT JOIN evaluations pe ON pe.proposal_id = p.parent_id
"""


def _costs(conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> dict[int, float]:
    """Model cost per proposal: calls tied to it, plus an equal share of its round's
    untied calls (a screening call that produced several proposals)."""
    if not rows:
        return {}
    run_ids = sorted({r["run_id"] for r in rows})
    marks = ",".join("?" for _ in run_ids)
    tied: dict[int, float] = defaultdict(float)
    untied: dict[tuple[int, int], float] = defaultdict(float)
    for c in conn.execute(
        f"SELECT run_id, round, proposal_id, cost_usd FROM model_calls WHERE run_id IN ({marks})",
        run_ids,
    ):
        if c["proposal_id"] is not None:
            tied[c["proposal_id"]] += c["cost_usd"]
        else:
            untied[(c["run_id"], c["round"])] += c["cost_usd"]
    per_round: dict[tuple[int, int], int] = defaultdict(int)
    for run_id, rnd, n in conn.execute(
        f"SELECT run_id, round, COUNT(*) FROM proposals WHERE run_id IN ({marks}) "
        "GROUP BY run_id, round",
        run_ids,
    ):
        per_round[(run_id, rnd)] = n
    out = {}
    for r in rows:
        key = (r["run_id"], r["round"])
        out[r["id"]] = tied[r["id"]] + untied[key] / max(per_round[key], 1)
    return out


def _attempt(r: sqlite3.Row, cost: float) -> Attempt:
    evaluated = r["accepted"] is not None
    deltas = json.loads(r["metric_deltas_json"]) if evaluated else {}
    return Attempt(
        id=r["id"],
        run_id=r["run_id"],
        round=r["round"],
        k=r["k"],
        parent_id=r["parent_id"],
        agent=r["agent"],
        model=r["model"],
        direction=r["direction"],
        hypothesis=r["hypothesis"],
        predicted_effect=r["predicted_effect"],
        attribution=r["attribution"],
        diff_summary=r["diff_summary"],
        edit_points=r["edit_points"],
        status=r["status"],
        refused_reason=r["refused_reason"],
        commit_sha=r["commit_sha"],
        branch=r["branch"],
        source=r["source"],
        accepted=bool(r["accepted"]) if evaluated else None,
        category=r["category"] or "",
        reasons=tuple(json.loads(r["reasons_json"])) if evaluated else (),
        objective=r["objective"],
        per_shape=json.loads(r["per_shape_json"]) if evaluated else {},
        metric_deltas={k: (float(v[0]), float(v[1])) for k, v in deltas.items()},
        parent_objective=r["parent_objective"],
        parent_per_shape=json.loads(r["parent_per_shape_json"] or "{}"),
        was_best=bool(r["was_best"]),
        cost_usd=cost,
        infra_reason=r["infra_reason"],
        timings_count=r["timings_count"] is None or bool(r["timings_count"]),
    )


def attempts(
    conn: sqlite3.Connection,
    *,
    task_name: str | None = None,
    run_id: int | None = None,
    proposal_id: int | None = None,
) -> list[Attempt]:
    where, args = [], []
    for column, value in (("r.task", task_name), ("p.run_id", run_id), ("p.id", proposal_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    sql = _ATTEMPTS_SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY p.id"
    rows = list(conn.execute(sql, args))
    costs = _costs(conn, rows)
    return [_attempt(r, costs.get(r["id"], 0.0)) for r in rows]


def run_state(conn: sqlite3.Connection, run_id: int) -> RunState:
    run = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if run is None:
        raise KeyError(run_id)
    rounds = list(
        conn.execute(
            "SELECT round, finished_at FROM rounds WHERE run_id = ? ORDER BY round", (run_id,)
        )
    )
    completed = tuple(r["round"] for r in rounds if r["finished_at"])
    unfinished = [r["round"] for r in rounds if not r["finished_at"]]
    next_round = min(unfinished) if unfinished else (max(completed) + 1 if completed else 1)
    all_attempts = attempts(conn, run_id=run_id)
    best = next((a for a in all_attempts if a.id == run["best_proposal_id"]), None)
    cost = conn.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM model_calls WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    return RunState(
        run_id=run_id,
        task=run["task"],
        task_digest=run["task_digest"],
        agent=run["agent"],
        device_name=run["device_name"],
        arch=run["arch"],
        config_json=run["config_json"],
        completed_rounds=completed,
        next_round=next_round,
        best_proposal_id=best.id if best else None,
        best_source=best.source if best else None,
        best_objective=best.objective if best else None,
        best_commit=best.commit_sha if best else "",
        attempts=tuple(a for a in all_attempts if a.status != "proposed"),
        in_flight=tuple(a for a in all_attempts if a.status == "proposed"),
        cost_usd=float(cost),
        owner=owner(run),
    )


def owner(run: sqlite3.Row) -> RunOwner | None:
    """The process holding a run: None once the run finished or its owner let go of it,
    and for runs written before owners were recorded."""
    if run["finished_at"] or run["owner_pid"] is None or not run["heartbeat_at"]:
        return None
    claimed = run["claimed_at"] if "claimed_at" in run.keys() else None
    return RunOwner(int(run["owner_pid"]), run["owner_host"], run["heartbeat_at"], claimed)


def run_info(r: sqlite3.Row) -> RunInfo:
    return RunInfo(
        r["id"],
        r["task"],
        r["task_digest"],
        r["agent"],
        r["device_name"],
        r["arch"],
        r["status"],
        r["best_proposal_id"],
        r["started_at"],
        r["finished_at"],
        owner(r),
    )


def prior_proposals(conn: sqlite3.Connection, task_name: str) -> list[PriorProposal]:
    rows = conn.execute(
        "SELECT p.id, p.round, p.hypothesis, p.fingerprint, p.source, pp.source AS parent_source, "
        "e.accepted, e.category, e.reasons_json, e.objective, EXISTS (SELECT 1 FROM best_changes b "
        "WHERE b.proposal_id = p.id) AS was_best FROM proposals p JOIN runs r ON r.id = p.run_id "
        "JOIN evaluations e ON e.proposal_id = p.id LEFT JOIN proposals pp ON pp.id = p.parent_id "
        "WHERE r.task = ? ORDER BY p.id",
        (task_name,),
    )
    return [
        PriorProposal(
            id=r["id"],
            round=r["round"],
            hypothesis=r["hypothesis"],
            fingerprint=r["fingerprint"],
            change=tuple(changed_lines(r["parent_source"], r["source"]))
            if r["parent_source"]
            else (),
            accepted=bool(r["accepted"]),
            category=r["category"],
            reasons=tuple(json.loads(r["reasons_json"])),
            measured=r["objective"] is not None,
            was_best=bool(r["was_best"]),
        )
        for r in rows
    ]


def promoted_best_id(conn: sqlite3.Connection, task_name: str) -> int | None:
    row = conn.execute(
        "SELECT b.proposal_id FROM best_changes b WHERE b.task = ? AND (b.pending_approval = 0 OR "
        "EXISTS (SELECT 1 FROM approvals a WHERE a.proposal_id = b.proposal_id)) "
        "ORDER BY b.id DESC LIMIT 1",
        (task_name,),
    ).fetchone()
    return int(row[0]) if row else None


def pending_best_id(conn: sqlite3.Connection, task_name: str) -> int | None:
    row = conn.execute(
        "SELECT b.proposal_id, b.pending_approval, EXISTS (SELECT 1 FROM approvals a WHERE "
        "a.proposal_id = b.proposal_id) approved FROM best_changes b WHERE b.task = ? "
        "ORDER BY b.id DESC LIMIT 1",
        (task_name,),
    ).fetchone()
    return int(row[0]) if row and row["pending_approval"] and not row["approved"] else None


def correct_sources(conn: sqlite3.Connection, task_name: str, limit: int) -> dict[int, str]:
    """The latest `limit` proposals of the task whose correctness record passed (timed or
    not, promoted or not: a candidate the gate found slower is still correct), by id."""
    rows = conn.execute(
        "SELECT p.id, p.source FROM proposals p JOIN runs r ON r.id = p.run_id "
        "JOIN evaluations e ON e.proposal_id = p.id WHERE r.task = ? AND "
        "json_extract(e.record_json, '$.verdict.accepted') IN (1, 'true') "
        "ORDER BY p.id DESC LIMIT ?",
        (task_name, limit),
    ).fetchall()
    return {int(r[0]): r[1] for r in reversed(rows)}
