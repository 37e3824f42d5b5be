"""Red team, issue 12, on the GPU (run on the H200: `pytest -m gpu tests/redteam`): the
flagship's fused kernel as the best, each hostile candidate behind a bypassed screen."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.gate import performance_gate
from tests.conftest import FUSED
from tests.redteam.harness import candidate_source, processes_with, write_candidate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
SIDE_STREAM = Path(__file__).resolve().parents[1] / "bench" / "cheats" / "side_stream.py"
GPU = {"device": "cuda", "shapes": "4096x8000", "dtype": "bfloat16", "screen": False}


@pytest.fixture(scope="module")
def best(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("best") / "fused_best.py"
    shutil.copyfile(FUSED, path)
    return path


@pytest.fixture(scope="module")
def honest(flagship, best, tmp_path_factory):
    cand = tmp_path_factory.mktemp("honest") / "fused_candidate.py"
    shutil.copyfile(FUSED, cand)
    rec = benchmark(flagship, cand, best=best, aa=False, **GPU)
    assert rec.problems == [], rec.problems
    return rec


def _median(rec, slot: str) -> float:
    return rec.shapes[0].impls[slot].median_ms


def _no_worker_left() -> None:
    assert processes_with("kernelloop.evaluate.worker") == []


def test_gpu_a_patching_triton_in_its_own_process_does_not_slow_the_best(
    flagship, best, honest, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_gpu_slow_the_best.py")
    rec = benchmark(flagship, cheat, best=best, aa=False, **GPU)
    # In its own worker its patch slows only itself: the harness's own Triton kernel (the
    # output commitment) gets the ~1 ms spin, which the trusted clock sees beside its calls
    # (H200, 2026-12-01: 1.77 ms unaccounted per call against 0.81 ms for the others).
    # Either it is rejected for that, or timed as slower; never the best slowed down.
    assert all("the trusted clock" in p for p in rec.problems), rec.problems
    # In one process its launcher patch put ~1 ms in front of every call of the best (~0.2 ms).
    assert _median(rec, "best") < 1.05 * _median(honest, "best"), (
        _median(rec, "best"),
        _median(honest, "best"),
    )
    gate = performance_gate(rec, flagship.spec.rules)
    assert not gate.accepted and gate.category in ("slower", "timing"), gate.reasons
    _no_worker_left()
    assert canary.intact()


def test_gpu_b_a_cheap_wrong_kernel_only_while_timed_is_caught_by_the_reference(
    flagship, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_gpu_knows_it_is_timed.py")
    rec = benchmark(flagship, cheat, best=best, **GPU)
    assert any(
        "the timed output differs from the reference (candidate:" in p for p in rec.problems
    ), rec.problems
    gate = performance_gate(rec, flagship.spec.rules)
    assert not gate.accepted and gate.category == "timing"
    _no_worker_left()
    assert canary.intact()


def test_gpu_c_a_worker_lying_about_its_events_is_caught_by_the_trusted_clock(
    flagship, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_gpu_lying_timer.py")
    rec = benchmark(
        flagship,
        cheat,
        best=best,
        device="cuda",
        shapes="16384x8192",
        dtype="bfloat16",
        screen=False,
    )
    assert any("claims a saving the trusted clock did not see" in p for p in rec.problems), (
        rec.problems
    )
    assert not any("replaced harness functions" in p for p in rec.problems), rec.problems
    assert performance_gate(rec, flagship.spec.rules).category == "timing"
    _no_worker_left()
    assert canary.intact()


@pytest.mark.parametrize("scale", [0.8, 0.5])
def test_gpu_f_a_worker_under_reporting_its_events_is_held_to_the_trusted_clock(
    flagship, best, tmp_path, canary, scale
):
    # The best's own kernel, reporting `scale` of its real time. Before run-through
    # batches, half (at 4096x8000) or 80% (both shapes) passed the trusted clock's check
    # unnoticed: the harness's own work per timed call (0.8 ms beside a 0.3 ms kernel on
    # the H200) drowned the difference. Now the run-through check rejects it, or raises
    # its samples by the whole excess the trusted clock saw. Session 15 (2026-12-02) found
    # the 20% lie unraised in about half the runs (a lower quartile of whole batches); with
    # batches split at the worker's `made` line and compared round by round with the best's,
    # 6 of 6 shape-checks raised it back (docs/security.md "Residual risks").
    src = candidate_source("timing_gpu_lying_timer.py")
    assert "(t / 100, s / 100)" in src
    cheat = tmp_path / "timing_gpu_lying_timer.py"
    cheat.write_text(src.replace("(t / 100, s / 100)", f"(t * {scale}, s * {scale})"))
    rec = benchmark(
        flagship,
        cheat,
        best=best,
        aa=False,
        device="cuda",
        shapes="4096x8000,16384x8192",
        dtype="bfloat16",
        screen=False,
    )
    if rec.problems:
        assert any("claims a saving the trusted clock did not see" in p for p in rec.problems)
        assert not performance_gate(rec, flagship.spec.rules).accepted
    else:
        assert any("its samples were raised" in w for w in rec.warnings), rec.warnings
        for sb in rec.shapes:
            cand, top = sb.impls["candidate"].median_ms, sb.impls["best"].median_ms
            # It claimed `scale` × top; raised by the excess the trusted clock saw, it is
            # back near top within the check's resolution (H200, 2026-12-02: 0.967-1.063 × top
            # after the raise; the slack is ~3-4% of these kernels).
            assert cand >= 0.92 * top, (sb.shape, cand, top)
    _no_worker_left()
    assert canary.intact()


def test_gpu_e_replaying_a_kept_output_while_timed_is_caught_by_an_audit(
    flagship, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_gpu_replays_output.py")
    rec = benchmark(flagship, cheat, best=best, aa=False, **GPU)
    assert any(
        "the timed output differs from the reference (candidate:" in p
        or "launched none of the candidate's kernels" in p
        for p in rec.problems
    ), rec.problems
    assert not any("best" in p.split(":")[0] for p in rec.problems), rec.problems
    assert not performance_gate(rec, flagship.spec.rules).accepted
    assert canary.intact()
    _no_worker_left()


def test_gpu_d_work_left_on_the_gpu_for_the_others_turns_is_seen_by_the_idle_probe(
    flagship, best, tmp_path, canary
):
    cheat = write_candidate(tmp_path, "timing_gpu_leftover_work.py")
    rec = benchmark(flagship, cheat, best=best, profile=False, **GPU)
    # Two ways this ends, both a rejection: the others' idle probes see the queued work, or
    # (seen on the H200, 2026-11-30) the queue never drains, so the candidate's own
    # device-wide sync never returns and its worker is killed at its deadline.
    assert any(
        "foreign GPU work was running" in p
        or ("candidate's worker did not answer" in p and "killed" in p)
        for p in rec.problems
    ), rec.problems
    assert performance_gate(rec, flagship.spec.rules).category == "timing"
    _no_worker_left()
    assert canary.intact()


def test_gpu_side_stream_work_is_counted_and_not_faster(flagship, best, canary):
    rec = benchmark(flagship, SIDE_STREAM, best=best, profile=False, **GPU)
    assert rec.shapes, rec.problems
    sb = rec.shapes[0]
    # Probed from an idle GPU or flagged per call, its side-stream work is counted: layer
    # norm plus four fp32 softmax passes in torch cannot beat the fused kernel.
    assert sb.impls["candidate"].hidden_calls > 0 or "device-wide" in rec.method, rec.method
    assert sb.impls["candidate"].median_ms > 0.8 * sb.impls["best"].median_ms
    assert not performance_gate(rec, flagship.spec.rules).accepted
    _no_worker_left()
    assert canary.intact()
