"""The history store's core: the SQLite connection, its transactions and row inserts
(HistoryStore is this plus store_runs.py's and store_best.py's methods, store.py).

WAL mode with synchronous=FULL: a write that returned is on disk, so a run killed with
SIGKILL loses at most what it had not yet written (the evaluation in flight), and readers
(`kernelloop history`, the MCP server) never block the loop.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from kernelloop.errors import KernelloopError
from kernelloop.history.schema import migrate


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _json_object(value: Any, what: str) -> str | None:
    """A `what` model or its JSON text -> the JSON text to store (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not isinstance(
            json.loads(value), dict
        ):  # json.loads itself raises on text that is not JSON
            raise ValueError(f"expected a {what} or its JSON object text, got {value[:60]!r}")
        return value
    if type(value).__name__ != what:  # also catches bench= and gate= swapped
        raise TypeError(
            f"expected a {what} or its JSON text, got {type(value).__name__}: {str(value)[:60]!r}"
        )
    return value.model_dump_json()


class StoreBase:
    """The connection and its transactions. Open with `HistoryStore.open(path)`.

    One store per thread (sqlite3 connections are not shared across threads); open one
    per worker thread or process: WAL lets them share the file, and BEGIN IMMEDIATE plus
    a 30 s busy timeout serializes their writes.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> Self:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn, str(path))
        except sqlite3.DatabaseError as e:
            raise KernelloopError(
                f"{path}: cannot be opened as a kernelloop history ({e}); move it aside or pass "
                "another --workspace."
            ) from None
        return cls(conn, path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _insert(self, table: str, values: Mapping[str, Any]) -> int:
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self._tx() as c:
            cur = c.execute(
                f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(values.values())
            )
            return int(cur.lastrowid or 0)
