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
