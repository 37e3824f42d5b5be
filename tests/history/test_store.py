from __future__ import annotations

import json
import sqlite3

import pytest
from kernels import HYP_MULTIROW, SOFTMAX_MULTIROW, SOFTMAX_PARENT
from records import make_record

from kernelloop.agents.base import Proposal
from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore, history_path
from kernelloop.history.schema import MIGRATIONS, SCHEMA_VERSION


def test_new_database_uses_wal_and_latest_schema(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.start_run("softmax", "d1")
    conn = sqlite3.connect(tmp_path / "h.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)


def test_reopening_keeps_data_and_reapplies_nothing(tmp_path):
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        run = store.start_run("softmax", "d1")
    with HistoryStore.open(path) as store:
        assert [r.id for r in store.runs("softmax")] == [run]


def test_database_from_a_newer_kernelloop_is_refused_with_a_fix(tmp_path):
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(KernelloopError, match="upgrade kernelloop"):
        HistoryStore.open(path)


def test_not_a_database_is_a_usage_error(tmp_path):
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(KernelloopError, match="cannot be opened"):
        HistoryStore.open(path)


def test_workspace_is_git_ignored_by_its_own_gitignore(task_dir):
    path = history_path(task_dir)
    assert path.parent == task_dir / ".kernelloop"
    assert (path.parent / ".gitignore").read_text().splitlines()[-1] == "*"


def test_proposal_evaluation_profile_and_costs_round_trip(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1", agent="llm", device_name="NVIDIA H200", arch="sm_90")
        store.start_round(run, 0)
        base = store.add_proposal(
            run, 0, source=SOFTMAX_PARENT, hypothesis="baseline", agent="baseline"
        )
        store.add_evaluation(base, make_record(), objective=1.0, per_shape={"4096x8000": 1.0})
        store.set_best(run, base)
        store.start_round(run, 1)
        p = Proposal(
            source=SOFTMAX_MULTIROW,
            hypothesis=HYP_MULTIROW,
            predicted_effect="+10%",
            agent="llm",
            model="cheap-model",
            attribution="fewer programs",
        )
        pid = store.add_proposal_from(run, 1, p, parent_id=base, edit_points=2)
        record = make_record(False, "slower", ("slower than best by 4.1% (noise 0.7%)",))
        store.add_evaluation(
            pid,
            record.model_dump_json(),
            objective=0.96,
            per_shape={"4096x8000": 0.96},
            metric_deltas={"dram_pct": (81.0, 74.5)},
        )
        store.add_profile(pid, "dram 74.5% of peak", {"dram_pct": 74.5})
        store.add_model_call(run, 1, "cheap-model", "openai", 1200, 800, 0.002, 3.1)
        store.add_model_call(
            run, 1, "strong-model", "anthropic", 3000, 2000, 0.05, 20.0, proposal_id=pid
        )

        a = store.attempt(pid)
        assert (a.accepted, a.category, a.objective) == (False, "slower", 0.96)
        assert a.reasons == ("slower than best by 4.1% (noise 0.7%)",)
        assert a.metric_deltas == {"dram_pct": (81.0, 74.5)}
        assert a.parent_objective == 1.0 and a.gain == pytest.approx(0.96)
        assert a.diff_summary.startswith("+") and "_softmax_kernel" in a.diff_summary
        assert a.cost_usd == pytest.approx(0.052)  # its own call + the round's untied call
        assert json.loads(store.record_json(pid))["verdict"]["category"] == "slower"
        assert store.latest_profile(pid) == ("dram 74.5% of peak", {"dram_pct": 74.5})
        ledger = store.cost_by_model(run)
        assert (
            ledger["strong-model"]["output_tokens"] == 2000 and ledger["cheap-model"]["calls"] == 1
        )
        assert store.arch_experience("sm_90") == {"evaluations": 2, "accepted": 1, "approvals": 0}
        assert store.arch_experience("sm_100") == {"evaluations": 0, "accepted": 0, "approvals": 0}


def test_pending_best_is_not_promoted_until_approved(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1", arch="sm_120")
        base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
        store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
        store.set_best(run, base)
        better = store.add_proposal(run, 1, source=SOFTMAX_MULTIROW, hypothesis="x", parent_id=base)
        store.add_evaluation(better, make_record(), objective=1.3, per_shape={})
        store.set_best(run, better, pending_approval=True, reason="new architecture")
        assert store.promoted_best("softmax").id == base
        assert store.pending_best("softmax").id == better
        store.add_approval("softmax", "sm_120", "alice", better, "checked on prod traces")
        assert store.promoted_best("softmax").id == better
        assert store.pending_best("softmax") is None
        assert [a.approver for a in store.approvals("sm_120")] == ["alice"]


def test_unknown_proposal_is_a_usage_error(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        with pytest.raises(KernelloopError, match="kernelloop history"):
            store.attempt(42)


def test_a_failed_write_leaves_nothing_half_written(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1")
        pid = store.add_proposal(run, 1, source="x = 1\n", hypothesis="h")
        store.add_evaluation(pid, make_record(), objective=1.0, per_shape={})
        # A second evaluation of the same proposal violates UNIQUE: the whole write
        # (evaluation + status + arch record) must roll back, not just part of it.
        with pytest.raises(sqlite3.IntegrityError):
            store.add_evaluation(pid, make_record(False, "slower"), objective=0.5, per_shape={})
        assert store.attempt(pid).objective == 1.0
        assert store.arch_experience("")["evaluations"] == 1


def test_a_later_migration_applies_once_on_open_and_keeps_existing_rows(tmp_path, monkeypatch):
    from kernelloop.history import schema

    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        run = store.start_run("softmax", "d1")
    appended = [*schema.MIGRATIONS, "ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';"]
    monkeypatch.setattr(schema, "MIGRATIONS", appended)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(appended))
    for _ in range(2):  # the second open must not re-run it (ALTER would fail on a dup column)
        with HistoryStore.open(path) as store:
            assert [r.id for r in store.runs("softmax")] == [run]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(appended)
    assert conn.execute("SELECT host FROM runs").fetchall() == [("",)]


def test_a_failing_migration_leaves_the_database_at_the_previous_version(tmp_path, monkeypatch):
    from kernelloop.history import schema

    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    broken = [*schema.MIGRATIONS, "CREATE TABLE extra (x INTEGER); ALTER TABLE nope ADD COLUMN y;"]
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(broken))
    with pytest.raises(KernelloopError):
        HistoryStore.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(broken) - 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'extra'").fetchone() is None


def test_open_task_memory_gives_the_store_and_the_versions_of_a_task(task_dir):
    from kernelloop.history import open_task_memory
    from kernelloop.task import load_task

    store, versions = open_task_memory(load_task(task_dir))
    with store:
        assert store.path == task_dir / ".kernelloop" / "history.sqlite"
        assert versions.kernel_path == "kernel/baseline.py"


def test_one_store_per_thread_can_write_concurrently_without_losing_rows(tmp_path):
    import threading

    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        run = store.start_run("softmax", "d1")

    def worker(k: int) -> None:  # like one evaluation slot per GPU, each with its own store
        with HistoryStore.open(path) as mine:
            for i in range(15):
                pid = mine.add_proposal(
                    run, i + 1, k=k, source=f"BLOCK = {k * 100 + i}\n", hypothesis="h"
                )
                mine.add_evaluation(pid, make_record(), objective=1.0, per_shape={})

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with HistoryStore.open(path) as store:
        attempts = store.attempts("softmax")
        assert len(attempts) == 60 and all(a.evaluated for a in attempts)
