"""The executor protocol: in turn (the loop's default) and one worker per GPU (issue #17's
local executor; here with jobs that only sleep, so the scheduling is what is tested)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.executor import InTurn, Slot
from kernelloop.executor.local import LocalGPUs, parse_gpus, visible_gpus


@dataclass
class Sleeper:
    name: str
    log: list
    lock: threading.Lock
    seconds: float = 0.3

    def __call__(self, slot: Slot) -> str:
        start = time.monotonic()
        time.sleep(self.seconds)
        with self.lock:
            self.log.append((slot.gpu, start, time.monotonic(), self.name))
        return f"{self.name}@{slot.label}"


def test_in_turn_runs_each_job_as_submitted_and_keeps_failures_in_the_future():
    ex, log, lock = InTurn(), [], threading.Lock()
    first = ex.submit(Sleeper("a", log, lock, 0.0))
    assert first.done() and first.result() == "a@slot0" and ex.ran == ["a"]

    def boom(slot: Slot) -> None:
        raise RuntimeError("the job failed")

    boom.name = "b"  # type: ignore[attr-defined]
    failed = ex.submit(boom)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the job failed"):
        failed.result()


def test_one_job_per_gpu_at_a_time_and_every_gpu_used():
    ex, log, lock = LocalGPUs([0, 3]), [], threading.Lock()
    t0 = time.monotonic()
    futures = [ex.submit(Sleeper(f"j{i}", log, lock)) for i in range(6)]
    results = [f.result(timeout=30) for f in futures]
    wall = time.monotonic() - t0
    ex.close()
    assert {r.split("@")[1] for r in results} == {"gpu0", "gpu3"}
    for gpu in (0, 3):
        spans = sorted((s, e) for g, s, e, _ in log if g == gpu)
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert wall < 6 * 0.3 * 0.8, wall  # two at a time, not one after another


def test_visible_gpus_and_the_gpus_option(tmp_path):
    driver = tmp_path / "gpus"
    for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"):
        (driver / bus).mkdir(parents=True)
    assert visible_gpus({}, driver) == [0, 1, 2]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,0"}, driver) == [2, 0]
    assert visible_gpus({}, tmp_path / "none") == []
    assert parse_gpus(None, [0, 1]) == [0, 1] and parse_gpus("1", [0, 1]) == [1]
    for bad, said in (("0,0", "twice"), ("x", "not a list"), ("5", "not visible")):
        with pytest.raises(KernelloopError, match=said):
            parse_gpus(bad, [0, 1])
    with pytest.raises(KernelloopError, match="no GPU is visible"):
        parse_gpus(None, [])


def test_the_local_executor_the_options_name(monkeypatch):
    from kernelloop.commands.executor_opts import make_executor
    from kernelloop.executor import local
    from kernelloop.executor.local import LocalJobs, local_executor

    assert isinstance(local_executor("cpu"), InTurn)  # the CPU default: one at a time
    jobs = local_executor("cpu", jobs=3)
    assert isinstance(jobs, LocalJobs) and jobs.slots == 3
    jobs.close()
    monkeypatch.setattr(local, "visible_gpus", lambda: [0, 1, 2])
    gpus = local_executor("cuda", "2,0")
    assert isinstance(gpus, LocalGPUs) and gpus.gpus == [2, 0] and gpus.slots == 2
    gpus.close()
    assert local_executor("cuda").gpus == [0, 1, 2]  # default: every visible GPU
    for args, said in (
        (("cuda", None, 2), "--jobs is for CPU runs"),
        (("cpu", "0", None), "--gpus needs a GPU run"),
    ):
        with pytest.raises(KernelloopError, match=said):
            local_executor(*args)
    with pytest.raises(KernelloopError, match="--ray-address needs --executor ray"):
        make_executor("local", "cpu", ray_address="auto")
    with pytest.raises(KernelloopError, match="unknown executor"):
        make_executor("slurm", "cpu")


def test_a_device_shared_by_jobs_gives_timings_it_alone():
    """Turns: checks share the device; a timing waits for the checks under way, and checks
    asked for while it waits or runs wait for it (writers first)."""
    from kernelloop.executor.turns import Turns

    turns, log, lock = Turns(), [], threading.Lock()

    def hold(kind: str, name: str, seconds: float) -> None:
        with getattr(turns, kind)():
            with lock:
                log.append(("in", name, time.monotonic()))
            time.sleep(seconds)
            with lock:
                log.append(("out", name, time.monotonic()))

    threads = [threading.Thread(target=hold, args=("shared", "check1", 0.4))]
    threads[0].start()
    time.sleep(0.1)
    threads.append(threading.Thread(target=hold, args=("exclusive", "timing", 0.3)))
    threads[1].start()
    time.sleep(0.1)
    threads.append(threading.Thread(target=hold, args=("shared", "check2", 0.1)))
    threads[2].start()
    for t in threads:
        t.join(timeout=10)
    order = [(what, name) for what, name, _ in sorted(log, key=lambda e: e[2])]
    assert order == [
        ("in", "check1"),
        ("out", "check1"),
        ("in", "timing"),
        ("out", "timing"),
        ("in", "check2"),
        ("out", "check2"),
    ], order
