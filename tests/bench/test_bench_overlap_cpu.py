"""The benchmark's workers started while correctness runs (issue 13), on the CPU task with
real sandboxed workers: started early they time as a plain benchmark does, no
implementation is imported before the run, and a rejected candidate's workers are killed
unused."""

import time
from dataclasses import replace
from pathlib import Path

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.bench import start_benchmark
from kernelloop.evaluate.trusted.clock.interleave import Session
from kernelloop.evaluate.trusted.launch import prestart
from kernelloop.executor import Slot
from kernelloop.loop.evaluation import EvaluationJob
from kernelloop.task import load_task
from tests import busy

ROOT = Path(__file__).resolve().parents[2]
CPU_TASK = ROOT / "examples" / "cpu_task"
FAST = CPU_TASK / "candidates" / "fast.py"


@pytest.fixture(scope="module")
def task():
    return load_task(CPU_TASK)


@pytest.fixture(autouse=True)
def _no_warm_workers_left():
    """The loop also starts the next evaluation's correctness workers (prestart.py): none
    may outlive a test (they would load the machine under the next one's timings)."""
    yield
    prestart.stop_all()


@pytest.fixture
def spawned(monkeypatch) -> list[Session]:
    """Every benchmark session whose workers were started, in order."""
    started: list[Session] = []
    real_spawn = Session.spawn

    def spy(self):
        if self.root is None:  # not yet spawned: this call starts its workers
            started.append(self)
        return real_spawn(self)

    monkeypatch.setattr(Session, "spawn", spy)
    return started


def _alive(session: Session) -> list[bool]:
    return [w.sp.proc.poll() is None for w in session.workers.values()]


def _wait_for_hellos(session: Session, timeout_s: float = 120.0) -> None:
    """Until every worker has said hello (imported Python and torch) and waits."""
    end = time.monotonic() + timeout_s
    while any(w._lines.empty() for w in session.workers.values()):
        assert time.monotonic() < end, "the spawned workers never said hello"
        time.sleep(0.1)


def _timed(rec, task) -> None:
    """Every CPU shape timed for every slot. A record the trusted side refused to time on
    a busy machine (BUSY) never gets here: `busy.measured` runs it again after the load
    falls, and skips the test saying so if it never does (it used to pass as it was)."""
    assert not rec.problems, rec.problems
    assert {s.shape for s in rec.shapes} == {s.label for s in task.spec.cpu_shapes}
    for sb in rec.shapes:
        assert {"candidate", "baseline", "baseline#aa"} <= set(sb.impls), sb.impls
        assert all(it.n > 0 for it in sb.impls.values())
    assert rec.speedup_vs_baseline is not None


def _spawned_early(task, folder: Path):
    """One early-spawned benchmark: its structural claims asserted, its record returned."""
    # An implementation that says on import that it was imported, where the trusted side
    # can see it: the workers must not import it before the run.
    folder.mkdir()
    marker = folder / "imported"
    cand = folder / "cand.py"
    cand.write_text(FAST.read_text() + f"\nimport pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    pending = start_benchmark(
        task,
        cand,
        device="cpu",
        shapes="cpu",
        sandbox="none",  # the marker must be writable to tell us when the import ran
        max_s_per_shape=0.2,
        head_start_s=120.0,
        screen=False,  # the policy screen would refuse the file write
    )
    try:
        pending.spawn()
        session = pending.session
        assert session is not None and session.workers
        _wait_for_hellos(session)
        assert all(_alive(session)), "a spawned worker exited before the run"
        assert not marker.exists(), "a worker imported its implementation before the run"
        pids = [w.sp.proc.pid for w in session.workers.values()]
        rec = pending.run()
    finally:
        pending.cancel()
    assert marker.exists()  # imported by the run's `load`
    # The same workers ran it: none was started again.
    assert [w.sp.proc.pid for w in session.workers.values()] == pids
    assert not any(_alive(session))
    assert session.root is not None and not session.root.exists()
    with pytest.raises(KernelloopError, match="already run or cancelled"):
        pending.run()
    return rec


def test_spawned_early_times_like_a_plain_benchmark(task, tmp_path):
    tries = iter(range(busy.TRIES))
    rec = busy.measured(
        lambda: _spawned_early(task, tmp_path / f"try{next(tries)}"),
        lambda r: r.problems,
        "the early-spawned benchmark",
    )
    _timed(rec, task)


def test_cancelled_workers_are_ended_and_their_folder_removed(task):
    pending = start_benchmark(
        task, FAST, device="cpu", shapes="cpu", max_s_per_shape=0.2, head_start_s=120.0
    )
    pending.spawn()
    session = pending.session
    assert session is not None
    assert all(_alive(session)) and session.root is not None and session.root.is_dir()
    pending.cancel()
    assert not any(_alive(session))
    assert not session.root.exists()
    with pytest.raises(KernelloopError, match="already run or cancelled"):
        pending.run()


def _run_late(task):
    # Spawned with no head start at all: by the time it runs, its workers' own wall-clock
    # limit could end them inside the run, so the run starts new ones.
    pending = start_benchmark(
        task, FAST, device="cpu", shapes="cpu", max_s_per_shape=0.2, head_start_s=0.0
    )
    pending.spawn()
    session = pending.session
    assert session is not None
    first = {s: w.sp.proc for s, w in session.workers.items()}
    time.sleep(0.2)
    rec = pending.run()
    assert all(p.poll() is not None for p in first.values())  # the first ones were ended
    assert {s: w.sp.proc.pid for s, w in session.workers.items()} != {
        s: p.pid for s, p in first.items()
    }
    return rec


def test_a_run_later_than_the_head_start_starts_its_workers_afresh(task):
    rec = busy.measured(lambda: _run_late(task), lambda r: r.problems, "the late benchmark")
    _timed(rec, task)


def test_the_loop_kills_a_rejected_candidates_benchmark_workers(task, tmp_path, spawned):
    # Right on the shapes of the compile and smoke stages, wrong on 8x16384 (full stage
    # only): the benchmark's workers start as smoke passes, then must be killed unused.
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        FAST.read_text().replace(
            "    return torch.addcmul",
            "    if x.shape[0] == 8:\n        inv = inv * 1.01\n    return torch.addcmul",
        )
    )
    job = EvaluationJob(
        name="wrong",
        task=task,
        path=wrong,
        best=None,
        device="cpu",
        measured=True,
        shapes="cpu",
        overlap=True,
    )
    ev = job(Slot())
    assert ev.record is not None and ev.record.verdict.category == "wrong"
    assert any("8x16384" in r for r in ev.record.verdict.reasons), ev.record.verdict.reasons
    assert ev.bench is None and ev.gate is None
    assert len(spawned) == 1, "the benchmark's workers were not started during correctness"
    session = spawned[0]
    assert session.workers and not any(_alive(session))
    assert session.root is not None and not session.root.exists()
    # A candidate that fails before smoke has passed starts none.
    spawned.clear()
    early = tmp_path / "early.py"
    early.write_text(FAST.read_text().replace("return torch.addcmul", "return 2 * torch.addcmul"))
    ev = replace(job, name="early", path=early)(Slot())
    assert ev.record is not None and ev.record.verdict.category == "wrong"
    assert spawned == []


def test_the_loop_times_a_passing_candidate_with_the_workers_it_started(task, spawned):
    job = EvaluationJob(
        name="fast",
        task=task,
        path=FAST,
        best=None,
        device="cpu",
        measured=True,
        shapes="cpu",
        overlap=True,
    )

    def attempt():
        spawned.clear()
        ev = job(Slot())
        if ev.infrastructure:  # both of the job's attempts lost (busy.measured looks why)
            return ev
        assert ev.record is not None and ev.record.verdict.accepted
        assert ev.bench is not None and ev.gate is not None
        # One session per evaluation, spawned before correctness and then run: not a second
        # one after it. The job evaluates twice where its first benchmark was refused on a
        # busy machine (loop/evaluation.py), its record then saying so.
        again = any("evaluated a second time" in w for w in ev.record.warnings)
        assert len(spawned) == (2 if again else 1), (len(spawned), ev.record.warnings)
        assert not any(_alive(spawned[-1]))
        return ev

    ev = busy.measured(
        attempt,
        lambda ev: [ev.infrastructure] if ev.infrastructure else ev.bench.problems,
        "the loop's overlapped benchmark",
    )
    assert not ev.infrastructure, ev.infrastructure
    _timed(ev.bench, task)
