"""The history store's runs and rounds: starting, finishing, claiming (one owner at a
time, with heartbeats) and finding a run to resume."""

from __future__ import annotations

from kernelloop.history import queries
from kernelloop.history.models import RunInfo, RunState
from kernelloop.history.store_base import StoreBase, _now


class RunsMixin(StoreBase):
    # ---- runs and rounds -------------------------------------------------------------

    def start_run(
        self,
        task_name: str,
        task_digest: str,
        agent: str = "",
        device_name: str = "",
        arch: str = "",
        config_json: str = "{}",
    ) -> int:
        return self._insert(
            "runs",
            dict(
                task=task_name,
                task_digest=task_digest,
                agent=agent,
                device_name=device_name,
                arch=arch,
                config_json=config_json,
                started_at=_now(),
            ),
        )

    def start_round(self, run_id: int, round_index: int) -> None:
        """Idempotent, so a resumed run may call it again for the round it died in."""
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO rounds (run_id, round, started_at) VALUES (?, ?, ?)",
                (run_id, round_index, _now()),
            )

    def finish_round(self, run_id: int, round_index: int, note: str = "") -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE rounds SET finished_at = ?, note = ? WHERE run_id = ? AND round = ?",
                (_now(), note, run_id, round_index),
            )

    def finish_run(self, run_id: int, status: str, summary_json: str = "{}") -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE runs SET status = ?, summary_json = ?, finished_at = ? WHERE id = ?",
                (status, summary_json, _now(), run_id),
            )

    def add_interruption(
        self,
        run_id: int,
        round_index: int,
        *,
        kind: str = "ctrl-c",
        ran_s: float | None = None,
        at: str | None = None,
    ) -> None:
        """Something stopped the run in this round (it stays unfinished, for `--resume`):
        a Ctrl-C (now), or a crash `--resume` found (`at` its last heartbeat); `ran_s`: how
        long the stretch it ended had run."""
        row = dict(run_id=run_id, round=round_index, at=at or _now(), kind=kind, ran_s=ran_s)
        self._insert("interruptions", row)

    def mark_resumed(self, run_id: int) -> None:
        """`--resume` took the run up again: its open interruption ends now."""
        with self._tx() as c:
            c.execute(
                "UPDATE interruptions SET resumed_at = ? WHERE run_id = ? AND resumed_at IS NULL",
                (_now(), run_id),
            )

    def interruptions(self, run_id: int) -> list[dict]:
        """The run's interruptions, oldest first: round, at, resumed_at (None: not yet),
        kind (ctrl-c | crash), ran_s (the stretch it ended; None: not known)."""
        rows = self._conn.execute(
            "SELECT round, at, resumed_at, kind, ran_s FROM interruptions WHERE run_id = ? "
            "ORDER BY id",
            (run_id,),
        )
        return [dict(r) for r in rows]

    def runs(self, task_name: str) -> list[RunInfo]:
        rows = self._conn.execute("SELECT * FROM runs WHERE task = ? ORDER BY id", (task_name,))
        return [queries.run_info(r) for r in rows]

    def claim_run(self, run_id: int, pid: int, host: str, since: str | None = None) -> None:
        """Record the process that runs the run from now on, with a first heartbeat;
        `since`: when its stretch began (default now), for a crash's running time."""
        with self._tx() as c:
            c.execute(
                "UPDATE runs SET owner_pid = ?, owner_host = ?, heartbeat_at = ?, "
                "claimed_at = ? WHERE id = ?",
                (pid, host, _now(), since or _now(), run_id),
            )

    def heartbeat(self, run_id: int, pid: int) -> bool:
        """Refresh the run's heartbeat if `pid` still holds it; False if it does not."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND owner_pid = ?",
                (_now(), run_id, pid),
            )
            return cur.rowcount == 1

    def release_run(self, run_id: int, pid: int) -> None:
        """The owner lets go of the run (finished, stopped, or left by an error it could
        see): with no owner the run reads as not live, and `--resume` may take it."""
        with self._tx() as c:
            c.execute(
                "UPDATE runs SET owner_pid = NULL, heartbeat_at = NULL "
                "WHERE id = ? AND owner_pid = ?",
                (run_id, pid),
            )

    def unfinished_runs(self, task_name: str) -> list[RunInfo]:
        """The task's runs still marked running (live, or crashed: see history.liveness)."""
        rows = self._conn.execute(
            "SELECT * FROM runs WHERE task = ? AND status = 'running' ORDER BY id", (task_name,)
        )
        return [queries.run_info(r) for r in rows]

    def find_resumable_run(self, task_name: str) -> RunState | None:
        """The latest run of the task that never finished (killed, crashed, or still live:
        the caller asks `history.liveness` which), if any."""
        row = self._conn.execute(
            "SELECT id FROM runs WHERE task = ? AND status = 'running' ORDER BY id DESC LIMIT 1",
            (task_name,),
        ).fetchone()
        return self.run_state(row["id"]) if row else None

    def run_state(self, run_id: int) -> RunState:
        return queries.run_state(self._conn, run_id)
