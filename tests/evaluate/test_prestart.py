"""Correctness workers started before their candidate exists (issue 13,
trusted/launch/prestart.py), on the CPU task with real sandboxed workers: a warm worker takes its
job and judges the candidate as a fresh one does, warm workers of other settings or past
their head start are replaced, a warm worker's time limit counts from its job, the loop
starts the next evaluation's workers and the next evaluation takes them, and a warm
compile-cache folder becomes the candidate's only where its bytes have none."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted import run_workers
from kernelloop.evaluate.trusted.launch import compile_cache, prestart
from kernelloop.evaluate.trusted.run import default_workers, evaluate
from kernelloop.executor import Slot
from kernelloop.loop.evaluation import EvaluationJob
from kernelloop.sandbox import SandboxConfig, SandboxProcess, detect_mode
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[2]
CPU_TASK = ROOT / "examples" / "cpu_task"
FAST = CPU_TASK / "candidates" / "fast.py"


@pytest.fixture(scope="module")
def task():
    return load_task(CPU_TASK)


@pytest.fixture(autouse=True)
def _stopped():
    yield
    prestart.stop_all()


@pytest.fixture
def fresh(monkeypatch) -> list[tuple]:
    """Every correctness worker `evaluate` starts itself (not a warm one)."""
    started: list[tuple] = []
    real = run_workers.SandboxProcess

    def spy(*args, **kwargs):
        started.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_workers, "SandboxProcess", spy)
    return started


def _warm(task, **kw) -> prestart.Warm:
    args = {
        "sandbox": "auto",
        "gpu": None,
        "workers": default_workers("cpu"),
        "timeout_s": task.spec.rules.eval_timeout_s,
        "head_s": 300.0,
        **kw,
    }
    assert prestart.warm(task, "cpu", **args)
    w = prestart.peek()
    assert w is not None and len(w.lanes) == args["workers"]
    return w


def _alive(w: prestart.Warm) -> list[bool]:
    return [lane.proc.proc.poll() is None for lane in w.lanes]


def test_a_warm_worker_takes_its_job_and_judges_the_candidate(task, fresh, tmp_path):
    w = _warm(task)
    lanes = list(w.lanes)
    time.sleep(0.5)
    assert all(lane.proc.proc.poll() is None for lane in lanes)  # waiting for its job
    rec = evaluate(task, FAST, device="cpu", timing=False, prestarted=True)
    assert rec.verdict.accepted, rec.verdict.reasons
    assert fresh == []  # the warm workers made every call
    assert prestart.peek() is None
    assert all(lane.proc.proc.poll() is not None for lane in lanes)
    assert not w.work.exists()
    # A wrong candidate is judged wrong by warm workers as by fresh ones.
    wrong = tmp_path / "wrong.py"
    wrong.write_text(FAST.read_text().replace("return torch.addcmul", "return 2 * torch.addcmul"))
    _warm(task)
    rec = evaluate(task, wrong, device="cpu", timing=False, prestarted=True)
    assert rec.verdict.category == "wrong" and fresh == []


def test_warm_workers_of_other_settings_or_past_their_head_start_are_replaced(task, fresh):
    other = _warm(task, timeout_s=task.spec.rules.eval_timeout_s + 1)
    rec = evaluate(task, FAST, device="cpu", timing=False, prestarted=True)
    assert rec.verdict.accepted and len(fresh) == default_workers("cpu")
    assert not any(_alive(other)) and not other.work.exists()
    fresh.clear()
    old = _warm(task, head_s=0.2)
    time.sleep(0.5)
    rec = evaluate(task, FAST, device="cpu", timing=False, prestarted=True)
    assert rec.verdict.accepted and len(fresh) == default_workers("cpu")
    assert not any(_alive(old))
    # Without `prestarted` (the CLI, the MCP server's own evaluations) none is taken.
    kept = _warm(task)
    fresh.clear()
    evaluate(task, FAST, device="cpu", timing=False)
    assert len(fresh) == default_workers("cpu") and prestart.peek() is kept
    prestart.discard()
    assert not any(_alive(kept)) and prestart.peek() is None


def test_a_worker_fed_later_has_its_time_limit_counted_from_its_job(tmp_path):
    cfg = SandboxConfig(mode=detect_mode("auto"), timeout_s=300.0, rw_paths=[tmp_path])
    code = "import sys, time; sys.stdin.buffer.read(); time.sleep(120)"
    proc = SandboxProcess([sys.executable, "-c", code], tmp_path, cfg, stdin=None)
    try:
        time.sleep(1.0)
        assert proc.proc.poll() is None
        t = time.monotonic()
        proc.feed(b"job", timeout_s=1.5)
        assert list(proc.lines()) == []
        waited = time.monotonic() - t
        with pytest.raises(RuntimeError, match="already written"):
            proc.feed(b"again")
    finally:
        res = proc.finish()
    assert res.timed_out and 1.4 < waited < 10.0, waited
    assert res.wall_s < 10.0  # from the job, not from the start


def test_a_warm_compile_cache_becomes_the_candidates_only_where_its_bytes_have_none(tmp_path):
    compile_cache.use(tmp_path / "caches")
    try:
        cfg, pending = compile_cache.bind_pending(SandboxConfig(rw_paths=[tmp_path]), native=True)
        assert pending is not None and pending in cfg.rw_paths and not any(pending.iterdir())
        assert cfg.extra_env["TORCH_EXTENSIONS_DIR"].startswith(str(pending))
        assert compile_cache.adopt(pending, b"candidate bytes")
        assert not pending.exists()
        named = compile_cache.folder(b"candidate bytes")
        assert named.is_dir()
        # What the first worker compiled, and what a hostile one planted beside it.
        (named / "triton" / "k1").mkdir(parents=True)
        (named / "triton" / "k1" / "kernel.cubin").write_bytes(b"compiled")
        outside = tmp_path / "outside.txt"
        outside.write_text("secret")
        (named / "triton" / "link").symlink_to(outside)
        os.mkfifo(named / "triton" / "fifo")
        # The same bytes again: their folder stays as it was, the new one is the worker's
        # own, with links to the regular files only (nothing followed, nothing read).
        _, second = compile_cache.bind_pending(SandboxConfig(), native=True)
        assert not compile_cache.adopt(second, b"candidate bytes") and second.is_dir()
        copy = second / "triton" / "k1" / "kernel.cubin"
        assert copy.read_bytes() == b"compiled"
        assert os.path.samefile(copy, named / "triton" / "k1" / "kernel.cubin")
        assert sorted(p.name for p in (second / "triton").iterdir()) == ["k1"]
        # No folder at all where nothing compiles (the Triton interpreter on a CPU).
        assert compile_cache.bind_pending(SandboxConfig())[1] is None
    finally:
        compile_cache.use(None)


def test_the_loop_starts_the_next_evaluations_workers_and_the_next_one_takes_them(task, fresh):
    job = EvaluationJob(
        name="fast",
        task=task,
        path=FAST,
        best=None,
        device="cpu",
        measured=False,
        shapes="cpu",
        overlap=True,
    )
    ev = job(Slot())
    assert ev.record is not None and ev.record.verdict.accepted
    assert len(fresh) == default_workers("cpu")  # nothing warm yet: its own
    warm = prestart.peek()
    assert warm is not None and all(_alive(warm))  # started for the next one
    fresh.clear()
    ev = job(Slot())
    assert ev.record is not None and ev.record.verdict.accepted
    assert fresh == []  # it took them
    assert not any(_alive(warm))
    assert prestart.peek() is not None and prestart.peek() is not warm


def test_warm_workers_are_stopped_when_the_evaluation_fails_before_their_job(task, monkeypatch):
    w = _warm(task)
    lanes = list(w.lanes)

    def broken(*_a, **_k):
        raise RuntimeError("the reference did not load")

    monkeypatch.setattr(run_workers, "Judge", broken)
    with pytest.raises(RuntimeError, match="did not load"):
        evaluate(task, FAST, device="cpu", timing=False, prestarted=True)
    assert all(lane.proc.proc.poll() is not None for lane in lanes)
    assert not any(lane.proc.fed for lane in lanes) and not w.work.exists()
