"""The history store's best kernels, approvals and per-architecture experience."""

from __future__ import annotations

from kernelloop.errors import KernelloopError
from kernelloop.history import queries
from kernelloop.history.models import Approval, Attempt
from kernelloop.history.store_base import StoreBase, _now


class BestMixin(StoreBase):
    # ---- best, approvals, architectures -----------------------------------------------

    def set_best(
        self,
        run_id: int | None,
        proposal_id: int,
        *,
        pending_approval: bool = False,
        reason: str = "",
    ) -> None:
        """Move the run's best. With pending_approval, it is not promoted until approved."""
        with self._tx() as c:
            row = c.execute(
                "SELECT r.task, r.arch, e.objective FROM proposals p "
                "JOIN runs r ON r.id = p.run_id "
                "LEFT JOIN evaluations e ON e.proposal_id = p.id WHERE p.id = ?",
                (proposal_id,),
            ).fetchone()
            if row is None:
                raise KernelloopError(
                    f"proposal #{proposal_id} is not in {self.path}; "
                    "pass an id from `kernelloop history`."
                )
            c.execute("UPDATE runs SET best_proposal_id = ? WHERE id = ?", (proposal_id, run_id))
            c.execute(
                "INSERT INTO best_changes (run_id, task, arch, proposal_id, objective, "
                "pending_approval, reason, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    row["task"],
                    row["arch"],
                    proposal_id,
                    row["objective"],
                    int(pending_approval),
                    reason,
                    _now(),
                ),
            )

    def promoted_best(self, task_name: str) -> Attempt | None:
        """The latest best of the task that needs no sign-off or has been approved."""
        pid = queries.promoted_best_id(self._conn, task_name)
        return self.attempt(pid) if pid else None

    def pending_best(self, task_name: str) -> Attempt | None:
        """The latest best still waiting for a person's approval, if any."""
        pid = queries.pending_best_id(self._conn, task_name)
        return self.attempt(pid) if pid else None

    def add_approval(
        self,
        task_name: str,
        arch: str,
        approver: str,
        proposal_id: int | None = None,
        note: str = "",
    ) -> int:
        return self._insert(
            "approvals",
            dict(
                task=task_name,
                arch=arch,
                proposal_id=proposal_id,
                approver=approver,
                note=note,
                created_at=_now(),
            ),
        )

    def approvals(self, arch: str, task_name: str | None = None) -> list[Approval]:
        sql = "SELECT * FROM approvals WHERE arch = ?" + (" AND task = ?" if task_name else "")
        args = (arch, task_name) if task_name else (arch,)
        return [
            Approval(
                r["id"],
                r["task"],
                r["arch"],
                r["proposal_id"],
                r["approver"],
                r["note"],
                r["created_at"],
            )
            for r in self._conn.execute(sql + " ORDER BY id", args)
        ]

    def arch_experience(self, arch: str) -> dict[str, int]:
        """How much this tool has seen of an architecture: evaluations, accepted, approvals."""
        row = self._conn.execute(
            "SELECT COUNT(*) n, COALESCE(SUM(accepted), 0) acc FROM arch_records WHERE arch = ?",
            (arch,),
        ).fetchone()
        n_appr = self._conn.execute(
            "SELECT COUNT(*) FROM approvals WHERE arch = ?", (arch,)
        ).fetchone()[0]
        return {"evaluations": row["n"], "accepted": row["acc"], "approvals": n_appr}
