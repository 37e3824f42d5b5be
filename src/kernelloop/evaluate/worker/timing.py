"""Timing inside a timing worker: one implementation, driven by the trusted side.

Every implementation (candidate, best, baseline, `--against` files, the A/A copy) runs in
its own sandboxed worker (worker/serve.py). The trusted side interleaves them: one worker
runs a batch of timed calls while the others are stopped, in a freshly shuffled order
each round, so clock and thermal drift and any position effect hit all of them alike.

GPU, per timed call (gpu_timer.py): an L2 flush (a write of ≥ 4× the device's L2), a
spin kernel that keeps the GPU busy while the host launches the call (Python launchers
cost 10-50 µs, which would otherwise land inside the interval), then CUDA events. The
end event is recorded on the calling stream; after a device-wide synchronize a second
event is recorded, so work a candidate hides on a side stream still shows up. The host's
wake-up after that synchronize grows with how long it waited, so matched calibration
calls (a spin as long as the call) measure it per implementation. The worker reports
raw intervals; the trusted side picks the samples (kernelloop.evaluate.protocol).

Before the first shape the GPU is held busy for a moment so its clocks leave idle, and
each implementation warms up for a minimum time as well as a minimum count. A shape's
rounds run until its time budget, so its samples spread over the budget and a short
clock transient moves a few samples, not the median. Kernels too short to time per call
are timed by CUDA-graph replay over rotating input sets whose total exceeds the L2.

CPU: wall-clock per call. Under Triton's interpreter those numbers are labelled and never
count; for tasks written in plain PyTorch (language = "torch") they are real timings.

Every timed call runs on inputs of its own (drawn from the batch's secret seed, untimed),
and its output is kept and committed to right after the call (evaluate/commitment.py).

Everything here is untrusted: the trusted side recomputes the statistics from the raw
intervals, checks them against its own clock, audits calls it picks after the batch (the
output must match its commitment and the float64 reference for that call's inputs) and
rejects times below the roofline.
"""

from __future__ import annotations

import time

import torch

from kernelloop.evaluate.commitment import digest
from kernelloop.evaluate.protocol import call_seed
from kernelloop.evaluate.worker.calls import pack_output

# Bound at import, before any candidate module runs (the worker imports this module
# first): a candidate that rebinds these later cannot change what the timer calls.
_perf = time.perf_counter
_monotonic = time.monotonic


class CpuSlot:
    """One implementation on one shape, timed by the wall clock per call; every timed call
    on inputs of its own, its output kept and committed to (as on the GPU)."""

    def __init__(self, fn, inputs: dict, make, kwargs: dict, spec: dict) -> None:
        self.fn, self.inputs, self.make, self.kwargs, self.spec = fn, inputs, make, kwargs, spec
        self.call = lambda: fn(**self.inputs, **kwargs)
        self.last: torch.Tensor | None = None
        self.kept: list[torch.Tensor] = []

    def prepare(self) -> dict:
        self.last = self.call()  # untimed
        times = []
        for _ in range(self.spec.get("cpu_warmup", 2)):
            t0 = _perf()
            self.call()
            times.append((_perf() - t0) * 1e3)
        rough = sorted(times)[len(times) // 2] if times else 0.0
        return {"rough_ms": rough, "input_bytes": 0, "l2_bytes": 0, "warmup_calls": len(times)}

    def rough(self) -> float:
        """One call timed alone (the trusted side sizes batches from it)."""
        t0 = _perf()
        self.call()
        return (_perf() - t0) * 1e3

    def batch(self, n: int, seed: int, key: int, sets: list[dict] | None = None) -> dict:
        """`sets`: the batch's inputs as the trusted side made them (one per call);
        without them each call's inputs are made here from the batch's seed."""
        calls, commits = [], []
        self.kept = []
        for j in range(n):
            self.inputs = sets[j] if sets is not None else self.make(call_seed(seed, j))
            out = None
            t0 = _perf()
            out = self.call()
            ms = (_perf() - t0) * 1e3
            calls.append([ms])
            out = pack_output(out)
            commits.append(digest(out, key) if out is not None else "")
            self.kept.append(out)
        self.last = self.kept[-1] if self.kept else None
        return {"calls": calls, "cals": [], "commits": commits}
