"""Telling a live run from a crashed one (a run row's owner pid, host and heartbeat), and
the infrastructure row: never a verdict, never a tried idea for the duplicate detector."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from kernels import HYP_MULTIROW, SOFTMAX_MULTIROW, SOFTMAX_PARENT
from records import make_record

from kernelloop.history import HistoryStore
from kernelloop.history.heartbeat import Heartbeat
from kernelloop.history.liveness import STALE_AFTER_S, liveness, pid_alive, this_host


@pytest.fixture
def store(tmp_path):
    s = HistoryStore.open(tmp_path / "h.sqlite")
    yield s
    s.close()


@pytest.fixture
def sleeper():
    """A real process that is alive until the test ends it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


def _run(store: HistoryStore, pid: int | None, host: str = "", age_s: float = 0.0) -> int:
    run = store.start_run("softmax", "d1")
    if pid is not None:
        store.claim_run(run, pid, host or this_host())
        beat = (datetime.now(UTC) - timedelta(seconds=age_s)).isoformat(timespec="milliseconds")
        store._conn.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ?", (beat, run))
    return run


def _info(store: HistoryStore, run: int):
    return next(r for r in store.runs("softmax") if r.id == run)


def test_a_running_owner_with_a_fresh_heartbeat_is_live_and_its_death_is_seen_at_once(
    store, sleeper
):
    run = _run(store, sleeper.pid)
    alive = liveness(_info(store, run))
    assert alive.live and f"pid {sleeper.pid}" in alive.why
    assert [r.id for r in store.unfinished_runs("softmax")] == [run]
    sleeper.kill()
    sleeper.wait()  # reaped: the pid is gone
    assert not pid_alive(sleeper.pid)
    dead = liveness(_info(store, run))
    assert not dead.live and "is gone" in dead.why
    assert liveness(store.run_state(run)).live is False  # RunState carries the owner too


def test_a_zombie_owner_is_not_alive(sleeper):
    sleeper.kill()
    time.sleep(0.2)  # killed, not yet reaped: a zombie
    assert not pid_alive(sleeper.pid)


def test_a_stale_heartbeat_means_crashed_even_if_the_pid_lives(store, sleeper):
    run = _run(store, sleeper.pid, age_s=STALE_AFTER_S + 5)  # e.g. a pid reused after a crash
    got = liveness(_info(store, run))
    assert not got.live and "no heartbeat" in got.why


def test_an_owner_on_another_host_is_judged_by_its_heartbeat_alone(store):
    fresh = _run(store, 999_999_999, host="other-box")
    stale = _run(store, 999_999_999, host="other-box", age_s=STALE_AFTER_S + 5)
    assert liveness(_info(store, fresh)).live
    assert not liveness(_info(store, stale)).live


def test_runs_without_an_owner_finished_runs_and_old_rows_are_not_live(store, sleeper):
    unowned = _run(store, None)  # also how a run from before migration 3 reads
    finished = _run(store, sleeper.pid)
    store.finish_run(finished, "finished")
    assert _info(store, unowned).owner is None and not liveness(_info(store, unowned)).live
    assert _info(store, finished).owner is None and not liveness(_info(store, finished)).live


def test_the_heartbeat_beats_from_its_thread_and_lets_go_on_exit(store):
    run = _run(store, None)
    with Heartbeat(store.path, run, every_s=0.05):
        first = _info(store, run).owner
        assert first is not None and liveness(_info(store, run)).live
        time.sleep(0.4)
        later = _info(store, run).owner
        assert later.heartbeat_at > first.heartbeat_at
    assert _info(store, run).owner is None and not liveness(_info(store, run)).live


def test_an_infrastructure_row_is_no_tried_idea_for_the_duplicate_detector(store):
    run = store.start_run("softmax", "d1")
    base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
    store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
    lost = store.add_proposal(
        run, 1, source=SOFTMAX_MULTIROW, hypothesis=HYP_MULTIROW, parent_id=base
    )
    store.mark_infrastructure(lost, "the sandbox could not start (bwrap: setting up uid map)")
    a = store.attempt(lost)
    assert (a.status, a.accepted, a.was_best) == ("infrastructure", None, False)
    assert "sandbox could not start" in a.infra_reason
    assert store.run_state(run).in_flight == ()  # decided: a resume does not redo it
    # Sent again, the identical source is evaluated, not refused ...
    assert store.check_duplicate("softmax", SOFTMAX_MULTIROW, HYP_MULTIROW, base) is None
    digest = store.digest("softmax")
    assert f"#{lost} r1 not evaluated" in digest and "may be sent again" in digest
    # ... while the same source once measured and rejected is refused as identical.
    again = store.add_proposal(
        run, 2, source=SOFTMAX_MULTIROW, hypothesis=HYP_MULTIROW, parent_id=base
    )
    store.add_evaluation(again, make_record(False, "slower", ("slower than best by 6%",)),
                         objective=0.94, per_shape={})  # fmt: skip
    dup = store.check_duplicate("softmax", SOFTMAX_MULTIROW, HYP_MULTIROW, base)
    assert dup is not None and dup.kind == "identical" and dup.duplicate_of == again
