"""GPU-only exploit classes, run on the H200 (benchmarks/gpu_cheats.sh): stale device
memory, side streams, timers around CUDA events, sticky CUDA errors."""

import pytest
import torch

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.run import evaluate
from tests.cheats.runner import CANDIDATES
from tests.conftest import FUSED

GPU = {"device": "cuda", "shapes": "4096x8000", "dtypes": ["bfloat16"]}
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_stale_device_memory_reads_as_poison(flagship):
    rec = evaluate(flagship, CANDIDATES / "stale_empty.py", timing=False, **GPU)
    # the poison is drawn per call (worker/calls.poison): NaN bytes, zeros, stale floats or
    # random bytes, whichever the first failing call drew
    assert rec.verdict.category in ("nonfinite", "wrong", "trivial", "stochastic"), (
        rec.verdict.reasons
    )


def test_side_stream_refused_and_not_faster_behind_the_screen(flagship):
    assert evaluate(flagship, CANDIDATES / "side_stream_gpu.py", **GPU).verdict.category == "static"
    rec = evaluate(flagship, CANDIDATES / "side_stream_gpu.py", timing=False, screen=False, **GPU)
    # The cheat orders its side stream after the calling stream, and correctness syncs the
    # whole device after each call, so its op-level outputs are right. The [e2e] model
    # built on it reads the op's output on the calling stream at once, before the side
    # stream may have written it: with two correctness workers sharing the GPU the race
    # showed as a drifted model (H200, 2026-12-02); that rejection is right too.
    assert rec.verdict.accepted or (
        rec.verdict.category == "e2e" and "drifted" in rec.verdict.reasons[0]
    ), rec.verdict.reasons
    # Only the timer stands in its way. Two paths count its hidden kernel, both by design:
    # when its calling stream looks shorter than 15 µs, the probe from an idle GPU sees
    # the escaped work and the shape is timed device-wide; when the host's launches
    # outlast the pre-call spin, the stream looks longer, no probe runs (it guards graph
    # replay, not used then) and every call's device-synced end counts the side work
    # (seen once in two runs on the H200, 2026-12-02: 0.280 ms against the honest
    # kernel's 0.240). Either way it must not look faster than the same kernel run
    # honestly.
    bench = benchmark(
        flagship,
        CANDIDATES / "side_stream_gpu.py",
        best=FUSED,
        device="cuda",
        shapes=GPU["shapes"],
        dtype="bfloat16",
        aa=False,
        profile=False,
        screen=False,
    )
    impls = bench.shapes[0].impls
    methods = {t.method.split(" (")[0] for t in impls.values()}
    assert len(methods) == 1, impls  # every slot of a shape is timed alike
    assert methods <= {"device-wide per call"} or all("device-synced" in m for m in methods), impls
    assert impls["candidate"].median_ms >= 0.8 * impls["best"].median_ms, impls


def test_patched_event_timer_is_tampering(flagship):
    rec = evaluate(flagship, CANDIDATES / "event_timer_gpu.py", timing=False, screen=False, **GPU)
    assert rec.verdict.category == "tamper", rec.verdict.reasons


def test_sticky_cuda_error_is_a_crash_and_the_next_evaluation_is_clean(flagship):
    rec = evaluate(flagship, CANDIDATES / "illegal_address_gpu.py", timing=False, **GPU)
    assert rec.verdict.category == "crash", rec.verdict.reasons
    assert evaluate(flagship, FUSED, timing=False, **GPU).verdict.accepted
