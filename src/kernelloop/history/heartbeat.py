"""The owner's side of liveness: take a run, beat from a thread while it runs, let go.

SQLite connections are per thread, so the beating thread opens its own store on the same
file (WAL lets it write beside the loop's connection).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from kernelloop.history.liveness import BEAT_EVERY_S, this_host
from kernelloop.history.store import HistoryStore


class Heartbeat:
    """`with Heartbeat(db_path, run_id):` holds the run for this process; `start()` and
    `stop()` do the same for holders whose life is not one block (the MCP server)."""

    def __init__(
        self,
        db_path: str | Path,
        run_id: int,
        every_s: float = BEAT_EVERY_S,
        since: str | None = None,
    ) -> None:
        """`since`: when this process's stretch of the run began (ISO time; default: now)."""
        self.db_path, self.run_id, self.every_s = Path(db_path), run_id, every_s
        self.since = since
        self.pid = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        with HistoryStore.open(self.db_path) as store:
            store.claim_run(self.run_id, self.pid, this_host(), self.since)
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-run-{self.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and let go of the run (idempotent)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with HistoryStore.open(self.db_path) as store:
            store.release_run(self.run_id, self.pid)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _beat(self) -> None:
        store = HistoryStore.open(self.db_path)
        try:
            while not self._stop.wait(self.every_s):
                try:
                    store.heartbeat(self.run_id, self.pid)
                except sqlite3.Error:
                    pass  # a write held up past the busy timeout: the next beat tries again
        finally:
            store.close()
