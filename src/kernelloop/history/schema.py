"""The history database schema, as an append-only list of migrations.

Never edit a migration that has shipped: a user's database records how far it got in
`PRAGMA user_version`, and only the migrations after that number run on open. To change
the schema, append a new entry.
"""

from __future__ import annotations

import sqlite3

from kernelloop.errors import KernelloopError

MIGRATIONS: list[str] = [
    # 1: the first schema.
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        task TEXT NOT NULL,
        task_digest TEXT NOT NULL,
        agent TEXT NOT NULL DEFAULT '',
        device_name TEXT NOT NULL DEFAULT '',
        arch TEXT NOT NULL DEFAULT '',
        config_json TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL DEFAULT 'running',
        best_proposal_id INTEGER,
        summary_json TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE INDEX runs_task ON runs(task, id);

    CREATE TABLE rounds (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        round INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run_id, round)
    );

    CREATE TABLE proposals (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        round INTEGER NOT NULL,
        k INTEGER NOT NULL DEFAULT 1,
        parent_id INTEGER REFERENCES proposals(id),
        agent TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        direction TEXT NOT NULL DEFAULT '',
        hypothesis TEXT NOT NULL DEFAULT '',
        predicted_effect TEXT NOT NULL DEFAULT '',
        attribution TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL,
        source_sha256 TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        edit_points INTEGER,
        diff_summary TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'proposed',
        refused_reason TEXT NOT NULL DEFAULT '',
        commit_sha TEXT NOT NULL DEFAULT '',
        branch TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX proposals_run ON proposals(run_id, round, k);
    CREATE INDEX proposals_fingerprint ON proposals(fingerprint);

    CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY,
        proposal_id INTEGER NOT NULL UNIQUE REFERENCES proposals(id),
        accepted INTEGER NOT NULL,
        category TEXT NOT NULL,
        reasons_json TEXT NOT NULL DEFAULT '[]',
        objective REAL,
        per_shape_json TEXT NOT NULL DEFAULT '{}',
        metric_deltas_json TEXT NOT NULL DEFAULT '{}',
        record_json TEXT NOT NULL,
        created_at TEXT NOT NULL
    );

    CREATE TABLE profiles (
        id INTEGER PRIMARY KEY,
        proposal_id INTEGER NOT NULL REFERENCES proposals(id),
        summary_text TEXT NOT NULL,
        metrics_json TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    );

    CREATE TABLE model_calls (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        round INTEGER NOT NULL,
        proposal_id INTEGER REFERENCES proposals(id),
        model TEXT NOT NULL,
        provider TEXT NOT NULL DEFAULT '',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        latency_s REAL NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX model_calls_run ON model_calls(run_id, round);

    -- Every move of the best pointer, so a best can be traced and rolled back.
    CREATE TABLE best_changes (
        id INTEGER PRIMARY KEY,
        run_id INTEGER REFERENCES runs(id),
        task TEXT NOT NULL,
        arch TEXT NOT NULL DEFAULT '',
        proposal_id INTEGER NOT NULL REFERENCES proposals(id),
        objective REAL,
        pending_approval INTEGER NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX best_changes_task ON best_changes(task, id);

    CREATE TABLE approvals (
        id INTEGER PRIMARY KEY,
        task TEXT NOT NULL,
        arch TEXT NOT NULL,
        proposal_id INTEGER REFERENCES proposals(id),
        approver TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX approvals_arch ON approvals(arch);

    -- What the tool has measured per architecture: the basis of the new-arch guard.
    CREATE TABLE arch_records (
        id INTEGER PRIMARY KEY,
        arch TEXT NOT NULL,
        device_name TEXT NOT NULL DEFAULT '',
        task TEXT NOT NULL,
        run_id INTEGER REFERENCES runs(id),
        proposal_id INTEGER REFERENCES proposals(id),
        accepted INTEGER NOT NULL,
        objective REAL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX arch_records_arch ON arch_records(arch);
    """,
    # 2: the benchmark record and the gate's verdict, beside the correctness record. NULL
    # where there is none (CPU runs, and evaluations stored before this migration).
    """
    ALTER TABLE evaluations ADD COLUMN bench_json TEXT;
    ALTER TABLE evaluations ADD COLUMN gate_json TEXT;
    """,
    # 3: who is running a run, and whether it is alive: the owner's pid and host and a
    # heartbeat the owner refreshes while it runs (NULL for runs from before, and once the
    # owner let go of the run); and, per proposal, why its evaluation could not be done
    # through no fault of the candidate (status 'infrastructure').
    """
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
    ALTER TABLE proposals ADD COLUMN infra_reason TEXT NOT NULL DEFAULT '';
    """,
    # Every Ctrl-C that stopped a run (issue 36): the round it stopped in, when, and when
    # `--resume` took the run up again (NULL until then), so a report's wall time can
    # say which part of it the run spent stopped.
    """
    CREATE TABLE interruptions (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        round INTEGER NOT NULL,
        at TEXT NOT NULL,
        resumed_at TEXT
    );
    CREATE INDEX interruptions_run ON interruptions(run_id, id);
    """,
    # What stopped the run ('ctrl-c', or 'crash': a kill -9 or a lost machine, found by
    # `--resume`, stopped at its last heartbeat) and how long the stretch it ended ran
    # (NULL where not known); and since when the current owner runs it, so a crashed
    # stretch's running time is its last heartbeat less that (issue 47: a report said
    # "never interrupted" after kill -9, and counted only the last stretch's wall time).
    """
    ALTER TABLE interruptions ADD COLUMN kind TEXT NOT NULL DEFAULT 'ctrl-c';
    ALTER TABLE interruptions ADD COLUMN ran_s REAL;
    ALTER TABLE runs ADD COLUMN claimed_at TEXT;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the database up to SCHEMA_VERSION, one transaction per migration."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > SCHEMA_VERSION:
        raise KernelloopError(
            f"{path}: history schema v{current} is newer than this kernelloop understands "
            f"(v{SCHEMA_VERSION}); upgrade kernelloop or point --workspace elsewhere."
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        # executescript commits any open transaction first, so the BEGIN/COMMIT pair here
        # makes the migration and its version bump land together or not at all.
        script = (
            f"BEGIN IMMEDIATE;\n{MIGRATIONS[version - 1]}\n"
            f"PRAGMA user_version = {version};\nCOMMIT;"
        )
        try:
            conn.executescript(script)
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
