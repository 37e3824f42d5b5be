"""The history store: one SQLite file per workspace, one transaction per write
(store_base.py). This file: proposals, evaluations, profiles, model calls and reading;
runs and rounds in store_runs.py; the best, approvals and architectures in store_best.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.values.record import EvaluationRecord, Verdict
from kernelloop.history import queries
from kernelloop.history.diffs import summarize_diff
from kernelloop.history.duplicates import DuplicateFinding, find_duplicate
from kernelloop.history.fingerprint import fingerprint
from kernelloop.history.models import Attempt
from kernelloop.history.store_base import _json_object, _now
from kernelloop.history.store_best import BestMixin
from kernelloop.history.store_runs import RunsMixin

if (
    TYPE_CHECKING
):  # both modules import torch; the history (and `kernelloop export`) does not need it
    from kernelloop.evaluate.trusted.clock.bench_record import BenchmarkRecord
    from kernelloop.gate import GateResult


class HistoryStore(RunsMixin, BestMixin):
    """Typed access to the history database. Open with `HistoryStore.open(path)`.

    One store per thread (sqlite3 connections are not shared across threads); open one
    per worker thread or process: WAL lets them share the file, and BEGIN IMMEDIATE plus
    a 30 s busy timeout serializes their writes.
    """

    # ---- proposals, evaluations, profiles, model calls --------------------------------

    def add_proposal(
        self,
        run_id: int,
        round_index: int,
        *,
        source: str,
        hypothesis: str,
        predicted_effect: str = "",
        direction: str = "",
        agent: str = "",
        model: str = "",
        attribution: str = "",
        k: int = 1,
        parent_id: int | None = None,
        edit_points: int | None = None,
        fingerprint_: str | None = None,
        diff_summary: str | None = None,
        commit_sha: str = "",
        branch: str = "",
    ) -> int:
        """Record a proposal before it is checked or evaluated. Round 0 is the baseline."""
        if diff_summary is None:
            parent = self.source_of(parent_id) if parent_id else None
            diff_summary = summarize_diff(parent, source) if parent is not None else "baseline"
        return self._insert(
            "proposals",
            dict(
                run_id=run_id,
                round=round_index,
                k=k,
                parent_id=parent_id,
                agent=agent,
                model=model,
                direction=direction,
                hypothesis=hypothesis,
                predicted_effect=predicted_effect,
                attribution=attribution,
                source=source,
                source_sha256=hashlib.sha256(source.encode()).hexdigest(),
                fingerprint=fingerprint_ or fingerprint(source),
                edit_points=edit_points,
                diff_summary=diff_summary,
                commit_sha=commit_sha,
                branch=branch,
                created_at=_now(),
            ),
        )

    def add_proposal_from(self, run_id: int, round_index: int, proposal: Any, **kw: Any) -> int:
        """Same as add_proposal, taking the fields of an `agents.base.Proposal`."""
        return self.add_proposal(
            run_id,
            round_index,
            source=proposal.source,
            hypothesis=proposal.hypothesis,
            predicted_effect=proposal.predicted_effect,
            direction=proposal.direction,
            agent=proposal.agent,
            model=proposal.model,
            attribution=proposal.attribution,
            **kw,
        )

    def set_commit(self, proposal_id: int, commit_sha: str, branch: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE proposals SET commit_sha = ?, branch = ? WHERE id = ?",
                (commit_sha, branch, proposal_id),
            )

    def set_attribution(self, proposal_id: int, attribution: str) -> None:
        """The agent's after-the-fact explanation of the measured effect."""
        with self._tx() as c:
            c.execute(
                "UPDATE proposals SET attribution = ? WHERE id = ?", (attribution, proposal_id)
            )

    def refuse_proposal(self, proposal_id: int, reason: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE proposals SET status = 'refused', refused_reason = ? WHERE id = ?",
                (reason, proposal_id),
            )

    def mark_infrastructure(self, proposal_id: int, reason: str) -> None:
        """No verdict could be had through no fault of the candidate (a sandbox that did not
        start, a worker killed from outside). Such a row has no evaluation: it never
        promotes, and the duplicate detector never counts it as a tried idea."""
        with self._tx() as c:
            c.execute(
                "UPDATE proposals SET status = 'infrastructure', infra_reason = ? WHERE id = ?",
                (reason, proposal_id),
            )

    def add_evaluation(
        self,
        proposal_id: int,
        record: EvaluationRecord | str,
        *,
        objective: float | None,
        per_shape: Mapping[str, float],
        metric_deltas: Mapping[str, tuple[float, float]] | None = None,
        verdict: Verdict | None = None,
        bench: BenchmarkRecord | str | None = None,
        gate: GateResult | str | None = None,
    ) -> int:
        """Store the full record and the numbers the digest needs, in one transaction.

        objective and per_shape are speedups over the baseline; metric_deltas maps a
        profile metric to (parent value, this candidate's value). bench and gate are the
        benchmark record and the gate's verdict (or their JSON), when there are any.
        """
        record_json = record if isinstance(record, str) else record.model_dump_json()
        bench_json, gate_json = (
            _json_object(bench, "BenchmarkRecord"),
            _json_object(gate, "GateResult"),
        )
        if verdict is None:
            verdict = (
                record.verdict
                if isinstance(record, EvaluationRecord)
                else Verdict.model_validate(json.loads(record_json)["verdict"])
            )
        now = _now()
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO evaluations (proposal_id, accepted, category, reasons_json, "
                "objective, per_shape_json, metric_deltas_json, record_json, bench_json, "
                "gate_json, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    proposal_id,
                    int(verdict.accepted),
                    verdict.category,
                    json.dumps(verdict.reasons),
                    objective,
                    json.dumps(dict(per_shape)),
                    json.dumps({k: list(v) for k, v in (metric_deltas or {}).items()}),
                    record_json,
                    bench_json,
                    gate_json,
                    now,
                ),
            )
            c.execute("UPDATE proposals SET status = 'evaluated' WHERE id = ?", (proposal_id,))
            c.execute(
                "INSERT INTO arch_records (arch, device_name, task, run_id, proposal_id, accepted, "
                "objective, created_at) SELECT r.arch, r.device_name, r.task, r.id, p.id, ?, ?, ? "
                "FROM proposals p JOIN runs r ON r.id = p.run_id WHERE p.id = ?",
                (int(verdict.accepted), objective, now, proposal_id),
            )
            return int(cur.lastrowid or 0)

    def add_profile(
        self, proposal_id: int, summary_text: str, metrics: Mapping[str, Any] | str
    ) -> int:
        metrics_json = metrics if isinstance(metrics, str) else json.dumps(dict(metrics))
        return self._insert(
            "profiles",
            dict(
                proposal_id=proposal_id,
                summary_text=summary_text,
                metrics_json=metrics_json,
                created_at=_now(),
            ),
        )

    def latest_profile(self, proposal_id: int) -> tuple[str, dict[str, Any]] | None:
        row = self._conn.execute(
            "SELECT summary_text, metrics_json FROM profiles WHERE proposal_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (proposal_id,),
        ).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def has_model_calls(self, run_id: int, round_index: int) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM model_calls WHERE run_id = ? AND round = ? LIMIT 1",
            (run_id, round_index),
        ).fetchone()
        return row is not None

    def add_model_call(
        self,
        run_id: int,
        round_index: int,
        model: str,
        provider: str,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        latency_s: float,
        proposal_id: int | None = None,
    ) -> int:
        return self._insert(
            "model_calls",
            dict(
                run_id=run_id,
                round=round_index,
                proposal_id=proposal_id,
                model=model,
                provider=provider,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=cost_usd,
                latency_s=latency_s,
                created_at=_now(),
            ),
        )

    def cost_by_model(self, run_id: int) -> dict[str, dict[str, float]]:
        """Per model: calls, input/output tokens, cost_usd, latency_s (the cost ledger)."""
        rows = self._conn.execute(
            "SELECT model, COUNT(*) calls, SUM(input_tokens) input_tokens, SUM(output_tokens) "
            "output_tokens, SUM(cost_usd) cost_usd, SUM(latency_s) latency_s FROM model_calls "
            "WHERE run_id = ? GROUP BY model ORDER BY model",
            (run_id,),
        )
        return {r["model"]: {k: r[k] for k in r.keys() if k != "model"} for r in rows}

    # ---- reading -----------------------------------------------------------------------

    def attempts(self, task_name: str, run_id: int | None = None) -> list[Attempt]:
        return queries.attempts(self._conn, task_name=task_name, run_id=run_id)

    def attempt(self, proposal_id: int) -> Attempt:
        found = queries.attempts(self._conn, proposal_id=proposal_id)
        if not found:
            raise KernelloopError(
                f"proposal #{proposal_id} is not in {self.path}; "
                "pass an id from `kernelloop history`."
            )
        return found[0]

    def correct_sources(self, task_name: str, limit: int = 12) -> dict[int, str]:
        """Sources of the task's latest correct candidates, by proposal id: the parents an
        agent may choose (docs/agents.md, "Parent of your choice")."""
        return queries.correct_sources(self._conn, task_name, limit)

    def source_of(self, proposal_id: int) -> str:
        row = self._conn.execute(
            "SELECT source FROM proposals WHERE id = ?", (proposal_id,)
        ).fetchone()
        if row is None:
            raise KernelloopError(
                f"proposal #{proposal_id} is not in {self.path}; "
                "pass an id from `kernelloop history`."
            )
        return str(row[0])

    def _evaluation_text(self, proposal_id: int, column: str) -> str | None:
        row = self._conn.execute(
            f"SELECT {column} FROM evaluations WHERE proposal_id = ?", (proposal_id,)
        ).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    def record_json(self, proposal_id: int) -> str | None:
        """The correctness EvaluationRecord JSON, None if the proposal was never evaluated."""
        return self._evaluation_text(proposal_id, "record_json")

    def bench_json(self, proposal_id: int) -> str | None:
        """The BenchmarkRecord JSON, exactly as stored; None without one (CPU runs, older
        histories)."""
        return self._evaluation_text(proposal_id, "bench_json")

    def gate_json(self, proposal_id: int) -> str | None:
        """The gate's GateResult JSON, exactly as stored; None without one."""
        return self._evaluation_text(proposal_id, "gate_json")

    def check_duplicate(
        self,
        task_name: str,
        source: str,
        hypothesis: str,
        parent_id: int | None,
        *,
        measured: bool = False,
    ) -> DuplicateFinding | None:
        """Before evaluating: is this an idea the task has already judged (and rejected)?
        `measured`: the asking run's timings count (a kernel never timed is timed then)."""
        parent_source = self.source_of(parent_id) if parent_id else None
        prior = queries.prior_proposals(self._conn, task_name)
        return find_duplicate(
            source, hypothesis, parent_source, prior, parent_id=parent_id, measured=measured
        )

    def digest(
        self, task_name: str, *, budget_tokens: int = 1500, told_run: int | None = None
    ) -> str:
        from kernelloop.history.digest import render_digest

        # Each candidate's compile facts in short (loop/feedback.py stores them), so the
        # digest keeps them after the round that told them.
        facts = dict(
            self._conn.execute(
                "SELECT proposal_id, summary_text FROM profiles "
                "WHERE json_extract(metrics_json, '$.compile_facts_line') IS NOT NULL"
            ).fetchall()
        )
        return render_digest(
            self.attempts(task_name), budget_tokens=budget_tokens, told_run=told_run, facts=facts
        )
