"""Scale-out on a 2-GPU host (issue #17; skipped without two CUDA GPUs): 8 candidates
judged on 2 GPUs in at most 0.55x the wall time of 1 GPU with the same verdicts, the A/A
spread on GPU 0 within 1% while GPU 1 is fully busy, and an evaluation bound to GPU 1
whose trusted side never allocates on GPU 0. The candidates, the load and the numbers
are those of benchmarks/scaleout.py (which writes them to a JSON for the record)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.trusted.launch.gpu_bind import torch_ordinal
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.executor.local import LocalGPUs
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("scaleout", ROOT / "benchmarks" / "scaleout.py")
scaleout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaleout)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs"
    ),
]
SHAPES, DTYPE = "4096x8000", "bfloat16"


def test_two_gpus_judge_eight_candidates_in_at_most_055x_the_time_of_one(tmp_path):
    task = load_task(scaleout.TASK)
    one = LocalGPUs([0])
    scaleout.judge_all(
        one, scaleout.jobs(task, scaleout.candidates(tmp_path, "w", 1), SHAPES, DTYPE)
    )
    one_s, one_rows = scaleout.judge_all(
        one, scaleout.jobs(task, scaleout.candidates(tmp_path, "a", 8), SHAPES, DTYPE)
    )
    one.close()
    two = LocalGPUs([0, 1])
    two_s, two_rows = scaleout.judge_all(
        two, scaleout.jobs(task, scaleout.candidates(tmp_path, "b", 8), SHAPES, DTYPE)
    )
    two.close()
    assert all(r["correct"] and not r["infrastructure"] for r in one_rows + two_rows), (
        one_rows,
        two_rows,
    )
    assert {r["slot"] for r in two_rows} == {"gpu0", "gpu1"}, two_rows
    assert [r["category"] for r in one_rows] == [r["category"] for r in two_rows]
    assert two_s <= 0.55 * one_s, (one_s, two_s)


def test_aa_spread_on_gpu0_stays_within_1pct_while_gpu1_is_busy():
    task = load_task(scaleout.TASK)
    hog = scaleout.start_hog(1)
    try:
        spread = scaleout.aa_spread(task, "16384x8192,4096x8000", DTYPE, 0)
    finally:
        hog.kill()
        hog.wait()
    assert not spread["problems"], spread
    assert spread["max"] is not None and spread["max"] <= 0.01, spread


def test_an_evaluation_on_gpu1_leaves_gpu0_untouched_by_the_trusted_side():
    task = load_task(scaleout.TASK)
    g0, g1 = torch_ordinal(0), torch_ordinal(1)
    before0 = torch.cuda.memory_allocated(g0)
    torch.cuda.reset_peak_memory_stats(g0)
    torch.cuda.reset_peak_memory_stats(g1)
    rec = evaluate(task, scaleout.FUSED, device="cuda", shapes=SHAPES, dtypes=[DTYPE], gpu=1)
    assert rec.verdict.accepted, rec.verdict.reasons
    assert torch.cuda.max_memory_allocated(g1) > 0  # the references and comparisons ran there
    assert torch.cuda.max_memory_allocated(g0) == before0  # and nothing here
