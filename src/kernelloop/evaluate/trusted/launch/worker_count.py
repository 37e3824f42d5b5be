"""How many correctness workers an evaluation starts, and each one's share of the GPU's
memory (what a worker may hold before an out-of-memory is its own, values/oom.py)."""

from __future__ import annotations

import math
import os

import torch

from kernelloop.task import Task


def default_workers(device: str, task: Task | None = None) -> int:
    """Correctness workers per evaluation. On the CPU two when it has two cores (the
    interpreter runs one thread per worker). On a GPU a new candidate's evaluation is mostly
    its Triton kernels compiling once per specialisation, and the workers compile theirs in
    parallel (shards.split keeps a shape's calls together): on the H200 (2026-12-02, warm
    workers, output slots, the flagship's honest candidate, median of 3) the full stage took
    9.8 s with one worker, 7.1 s with two and 4.1 s with four, the whole judgement with the
    gate's benchmark 17.6 s with four, 22.5 s with two (benchmarks/results/
    2026-12-02-h200-session19). So up to GPU_WORKERS, one per two CPU cores, and as many as
    the GPU's memory holds (`gpu_memory_workers`); without the task, two."""
    if device == "cpu":
        return max(1, min(2, os.cpu_count() or 1))
    if task is None:
        return 2
    by_cpu = max(1, (os.cpu_count() or 2) // 2)
    return max(1, min(GPU_WORKERS, by_cpu, gpu_memory_workers(task)))


GPU_WORKERS = 4
# A correctness worker's GPU memory, per element of the task's largest GPU shape (the
# product of its dims) and beyond a fixed part: KernelBench level1/23's 4096x393216 float32
# softmax took 36.6 GB per worker on the H200 (inputs, the output and the previous one,
# its slots), ~23 bytes per element; the fixed part is the CUDA context and two 512 MB slots.
WORKER_BYTES_PER_ELEMENT = 24
WORKER_FIXED_BYTES = 2 << 30
GPU_SHARE = 0.6  # of the GPU's memory for correctness workers (the judge needs the rest)
# The judge's own GPU memory per element of that shape, while it judges one call (the
# task's inputs, their float64 copies, the float64 reference and its temporaries, the
# candidate's output loaded, the trivial outputs it is proved against; the comparison
# itself is chunked, compare.CHUNK), and its fixed part (its CUDA context). Measured on
# the H200 (2026-12-03 and 2026-12-05, `gate-check` of level1/23's 4096x393216 float32
# softmax, two workers): the judge held 56.6 GiB and asked for 12 GiB more (its float64
# reference) — ~46 B per element — and ran out beside the two workers' 36.6 GB each on 4
# of 5 mutants (verdict `internal`). The workers' share leaves the judge this much.
JUDGE_BYTES_PER_ELEMENT = 48
JUDGE_FIXED_BYTES = 2 << 30


def worker_share_bytes(device: str, n_workers: int) -> int | None:
    """One correctness worker's share of the GPU's memory (None on the CPU): what a worker
    may hold before an out-of-memory is its own (oom.py)."""
    total = _gpu_total_bytes() if device == "cuda" else None
    return None if total is None else int(GPU_SHARE * total) // max(1, n_workers)


def _gpu_total_bytes() -> int | None:
    """The current GPU's memory, or None where CUDA cannot say."""
    try:
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    except (RuntimeError, AssertionError):
        return None


def gpu_memory_workers(task: Task) -> int:
    """How many correctness workers the GPU's memory holds for `task` (at least one): a
    deliberate overestimate for tasks whose dims multiply to more than their largest tensor
    (a matmul's M x N x K), which then get fewer workers, never an out-of-memory."""
    total = _gpu_total_bytes()
    if total is None:
        return 1
    elements = max((math.prod(s.dims.values()) for s in task.spec.shapes), default=1)
    per_worker = WORKER_BYTES_PER_ELEMENT * elements + WORKER_FIXED_BYTES
    # the workers get GPU_SHARE of the card, and never what the judge needs beside them
    judge = JUDGE_BYTES_PER_ELEMENT * elements + JUDGE_FIXED_BYTES
    room = min(GPU_SHARE * total, total - judge)
    return max(1, int(room // per_worker))
