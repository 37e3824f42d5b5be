"""examples/matmul_bias_gelu end to end: `kernelloop evaluate` through the real CLI and
the sandbox on the CPU (Triton interpreter), and on a GPU its % of floor against the
compute roof."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MATMUL = ROOT / "examples" / "matmul_bias_gelu"
CANDIDATES = MATMUL / "candidates"


def evaluate_cli(candidate, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "evaluate", str(MATMUL), str(candidate)]
        + ["--json", "--device", "cpu", "--no-timing", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("candidate", [MATMUL / "baseline.py", CANDIDATES / "fast.py"])
def test_honest_kernels_are_accepted_on_every_cpu_shape_and_dtype(candidate):
    res = evaluate_cli(candidate)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rec = json.loads(res.stdout)
    assert rec["verdict"]["accepted"] is True
    assert rec["environment"]["sandbox"] == "bwrap"
    judged = {(c["shape"], c["dtype"]) for c in rec["checks"] if c["suite"] == "random"}
    labels = {"33x65x100", "16x48x257", "70x17x48"}
    assert {s for s, _ in judged} >= labels
    assert {d for _, d in judged} == {"bfloat16", "float16"}
    extreme = {c["case"] for c in rec["checks"] if c["suite"] == "extreme"}
    assert extreme == {"large", "gelu_tail"}


def test_dropping_the_k_tail_is_rejected_as_wrong_with_the_shape_named():
    res = evaluate_cli(CANDIDATES / "wrong_k_tail.py")
    assert res.returncode == 1, res.stderr[-2000:]
    verdict = json.loads(res.stdout)["verdict"]
    assert verdict["accepted"] is False
    assert verdict["category"] == "wrong"
    # Every CPU shape has K % BLOCK_K != 0; the first judged one is named with its numbers.
    assert any("outside atol=0.02, rtol=0.016" in r for r in verdict["reasons"]), verdict


# ---- GPU (the lead runs these on the H200) ------------------------------------------------


@pytest.mark.gpu
def test_gpu_fast_candidate_accepted_and_floor_is_the_compute_roof():
    """Needs evaluate/ to take its floor from task/roofline.py (floor_on): the record's
    floor is then 2·M·N·K / peak on the compute-bound shape and bytes / DRAM rate on M=16."""
    import torch

    from kernelloop.evaluate.trusted.run import evaluate
    from kernelloop.task import floor_on, load_task

    task = load_task(MATMUL)
    rec = evaluate(
        task,
        CANDIDATES / "fast.py",
        device="cuda",
        shapes="4096x4096x4096,16x8192x8192",
        dtypes=["bfloat16"],
    )
    assert rec.verdict.accepted, rec.verdict.reasons
    name = torch.cuda.get_device_name()
    by_shape = {t.shape: t for t in rec.timings if t.impl == "candidate"}
    for label, bound in (("4096x4096x4096", "compute"), ("16x8192x8192", "memory")):
        want = floor_on(task, task.find_shape(label), "bfloat16", name)
        t = by_shape[label]
        assert want.bound == bound
        assert t.floor_ms == pytest.approx(want.ms)
        assert t.floor_bound == bound
        assert 0 < t.pct_of_floor < 100
        print(f"{label}: {t.median_ms:.4f} ms = {t.pct_of_floor:.1f}% of the {bound} floor")


@pytest.mark.gpu
def test_gpu_fast_candidate_beats_the_baseline_on_every_shape():
    from kernelloop.evaluate.trusted.bench import benchmark
    from kernelloop.gate import performance_gate
    from kernelloop.task import load_task

    task = load_task(MATMUL)
    rec = benchmark(task, CANDIDATES / "fast.py", device="cuda", dtype="bfloat16")
    assert rec.problems == [], rec.problems
    for sb in rec.shapes:
        cand, base = sb.impls["candidate"], sb.impls["baseline"]
        print(
            f"{sb.shape}: fast {cand.median_ms:.4f} ms, baseline {base.median_ms:.4f} ms, "
            f"{cand.pct_of_floor or 0:.1f}% of the {getattr(sb, 'floor_bound', '?')} floor"
        )
    verdict = performance_gate(rec, task.spec.rules)
    assert verdict.accepted, verdict.reasons


@pytest.mark.gpu
def test_gpu_k_tail_bug_is_rejected_on_the_drawn_shape_or_the_odd_one():
    from kernelloop.evaluate.trusted.run import evaluate
    from kernelloop.task import load_task

    rec = evaluate(
        load_task(MATMUL),
        CANDIDATES / "wrong_k_tail.py",
        device="cuda",
        shapes="1000x3000x1000",
        dtypes=["bfloat16"],
    )
    assert not rec.verdict.accepted
    assert rec.verdict.category == "wrong"
