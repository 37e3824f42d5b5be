"""A Ray actor that dies under a job (issue #17): the job goes once more to a fresh actor;
a second death loses it, and the loop records an infrastructure fault, not a verdict, and
goes on. A fresh actor that cannot start gives up its slot; with none left, one sentence.

Real parts: one local Ray instance of two CPUs for the module (as tests/executor/
test_ray.py starts), real actors killed from outside (`ray.kill`) or ending their own
process (`os._exit`, tests/executor/dying.py); the loop test runs real sandboxed
evaluations of the flagship under Triton's interpreter, with SQLite and git in temp dirs.
CI installs Ray: there these tests must run, not skip."""

from __future__ import annotations

import json
import os
import time

import pytest

from kernelloop.agents.scripted import ScriptedAgent
from kernelloop.errors import KernelloopError
from kernelloop.executor import JobLost
from kernelloop.loop import Options, run_loop
from kernelloop.loop.view import RunView
from kernelloop.task import load_task
from tests.executor.dying import Dies, Doomed, pids
from tests.loop.test_kill_resume import _rows
from tests.loop.test_parallel_rounds import verdicts
from tests.loop.test_run import FAST, _task_copy

WAIT_S = 60  # for a job on an idle 2-core machine: well under a second


@pytest.fixture(scope="module")
def ray():
    if os.environ.get("CI"):
        import ray  # noqa: F401  (CI installs the cluster extra: never a silent skip there)
    else:
        ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def actors(ray):
    from kernelloop.executor.cluster import RayActors

    made = []

    def make(**kw) -> RayActors:
        made.append(RayActors("cpu", actors=2, **kw))
        return made[-1]

    yield make
    for ex in made:
        ex.close()


def _wait_for(tally, n: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(pids(tally)) < n:
        assert time.monotonic() < deadline, f"no attempt {n} in {WAIT_S} s"
        time.sleep(0.05)


def test_an_actor_killed_mid_job_hands_the_job_to_a_fresh_actor(ray, actors, tmp_path):
    ex = actors()
    before = {pid for _h, pid, _g in ex.where}
    tally = str(tmp_path / "killed")
    killed = ex.submit(Dies("killed", tally, sleep_s=WAIT_S))
    _wait_for(tally, 1)  # it runs, and sleeps
    (slot,) = [i for name, i in ex.ran if name == "killed"]
    ray.kill(ex._actors[slot])  # from outside, as an operator or a lost node would
    other = ex.submit(Dies("other", str(tmp_path / "other"))).result(timeout=WAIT_S)
    got = killed.result(timeout=WAIT_S)
    # The second attempt ran on a fresh actor in the same slot, told why it was sent again.
    assert got["attempt"] == 2 and got["slot"] == slot, got
    assert got["pid"] not in before and ex.where[slot][1] == got["pid"], (got, ex.where)
    assert f"Ray actor {slot}" in got["after"] and "ActorDiedError" in got["after"], got
    assert str(pids(tally)[0]) in got["after"]  # the dead actor's pid is named
    assert other["attempt"] == 1 and ex.slots == 2
    assert [(name, i) for name, i, _why in ex.deaths] == [("killed", slot)]


def test_a_job_whose_actor_dies_twice_is_lost_and_the_rest_go_on(actors, tmp_path):
    ex = actors()
    tally = str(tmp_path / "twice")
    lost = ex.submit(Dies("twice", tally, deaths=2)).exception(timeout=WAIT_S)
    assert isinstance(lost, JobLost), lost
    assert "died twice" in str(lost) and str(lost).count("ActorDiedError") == 2, lost
    first, second = pids(tally)
    assert first != second and str(first) in str(lost) and str(second) in str(lost)
    assert len(ex.deaths) == 2 and ex.slots == 2
    # Both slots still judge: the dead actors were replaced.
    later = [ex.submit(Dies(f"later{k}", str(tmp_path / f"l{k}"), sleep_s=0.5)) for k in (0, 1)]
    assert {f.result(timeout=WAIT_S)["slot"] for f in later} == {0, 1}
    assert {first, second}.isdisjoint({pid for _h, pid, _g in ex.where})


def test_a_slot_whose_fresh_actor_cannot_start_is_given_up(actors, tmp_path):
    # No time at all for a fresh actor to start: each death gives its slot up.
    ex = actors(start_timeout_s=0)
    got = ex.submit(Dies("a", str(tmp_path / "a"), deaths=1)).result(timeout=WAIT_S)
    dead_slot = ex.deaths[0][1]
    assert got["attempt"] == 2 and got["slot"] != dead_slot and ex.slots == 1, got
    # The last actor dies too: nothing is left to judge on, said in one sentence.
    with pytest.raises(KernelloopError, match="every Ray actor of this run died") as e:
        ex.submit(Dies("b", str(tmp_path / "b"), deaths=1)).result(timeout=WAIT_S)
    assert "--resume" in str(e.value) and ex.slots == 0


def test_the_loop_records_a_twice_lost_evaluation_as_infrastructure_and_goes_on(actors, tmp_path):
    folder = _task_copy(tmp_path)
    script = tmp_path / "two"
    script.mkdir()
    for name in ("01_fused_naive", "04_fused_philox4"):  # both correct (test_parallel_rounds)
        for ext in (".py", ".toml"):
            (script / f"{name}{ext}").write_text((folder / "scripted" / f"{name}{ext}").read_text())
    tallies = tmp_path / "tallies"
    tallies.mkdir()
    # r1_1's actor dies mid-evaluation on both attempts, r1_2's on its first only.
    ex = Doomed(actors(), {"r1_1": 2, "r1_2": 1}, tallies)
    summary = run_loop(
        load_task(folder),
        ScriptedAgent(script, per_round=2),
        Options(device="cpu", rounds=1, executor=ex, **FAST),
        RunView(live_enabled=False),
    )
    assert summary["status"] == "finished", summary
    assert len(pids(str(tallies / "r1_1"))) == 2 and len(pids(str(tallies / "r1_2"))) == 2
    assert verdicts(folder) == [
        (0, 1, "evaluated", "accepted"),
        (1, 1, "infrastructure", ""),  # no verdict on the candidate
        (1, 2, "evaluated", "accepted"),  # judged on a fresh actor, in full
    ]
    (infra,) = _rows(folder, "SELECT infra_reason FROM proposals WHERE status='infrastructure'")
    reason = infra["infra_reason"]
    assert reason.startswith("the executor lost the evaluation: its Ray actor died twice")
    assert all(str(pid) in reason for pid in pids(str(tallies / "r1_1"))), reason
    (row,) = _rows(
        folder,
        "SELECT e.record_json FROM evaluations e JOIN proposals p ON p.id = e.proposal_id "
        "WHERE p.round = 1 AND p.k = 2",
    )
    warnings = json.loads(row["record_json"])["warnings"]
    first_pid = pids(str(tallies / "r1_2"))[0]
    assert any(
        w.startswith("evaluated a second time") and f"pid {first_pid}" in w for w in warnings
    ), warnings
    # The run summary (and so a suite's leaderboard) says the same.
    assert [(a["k"], a["status"]) for a in summary["attempts"]] == [
        (1, "infrastructure"),
        (2, "evaluated"),
    ]
    assert summary["attempts"][0]["infra_reason"] == reason and ex.slots == 2
