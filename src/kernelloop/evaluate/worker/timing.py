"""Timing inside the worker: implementations interleaved on the same inputs.

For each shape, every implementation (candidate, best, baseline …) is called in rounds,
in a fresh shuffled order each round, so that clock and thermal drift and any position
effect hit all of them alike. An optional A/A slot times one implementation twice under
two names: the spread between the two is the noise the trusted side's gate must beat.

GPU, per timed call: an L2 flush (a write of ≥ 4× the device's L2), a spin kernel that
keeps the GPU busy while the host launches the call (Python launchers cost 10-50 µs,
which would otherwise land inside the interval), then CUDA events. The end event is
recorded on the calling stream; after a device-wide synchronize a second event is
recorded, so work a candidate hides on a side stream still shows up (see `gpu_timer._pick`). The
host's wake-up after that synchronize grows with how long it waited, so the allowance
it gets is calibrated per implementation with a spin of the same length (measured on
the H200: a fixed no-op calibration flagged 10-67% of honest 0.2-0.9 ms calls).

Before the first shape the GPU is held busy for a moment so its clocks leave idle, and
each implementation warms up for a minimum time as well as a minimum count. A shape's
rounds run until its time budget, so its samples spread over the budget and a short
clock transient moves a few samples, not the median.
Kernels too short to time per call are timed by CUDA-graph replay over rotating input
sets whose total exceeds the L2. A second timer (torch.profiler kernel durations) can
re-measure chosen implementations.

CPU: wall-clock per call. Under Triton's interpreter those numbers are labelled and never
count; for tasks written in plain PyTorch (language = "torch") they are real timings.

Everything here is untrusted: the trusted side recomputes the statistics from the raw
samples, checks their sum against its own clock and rejects times below the roofline.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import torch

from kernelloop.evaluate.protocol import aa_slot, quantiles  # noqa: F401  (shared definitions)
from kernelloop.evaluate.worker.gpu_timer import CudaTimer, same_bytes

# Bound at import, before any candidate module runs (the worker imports this module
# first): a candidate that patches these later cannot change what the timer calls.
_perf = time.perf_counter
_monotonic = time.monotonic


def time_impls(job: dict, fns: dict, make_inputs) -> Iterator[dict]:
    """Yield one dict per (shape, slot) as each shape finishes, so the trusted side can
    timestamp every shape's timing phase with its own clock."""
    spec = job["timing"]
    dev = job["device"]
    dtype = getattr(torch, spec["dtype"])
    kwargs = {**job["params"], **spec["params"]}
    slots = {n: n for n in spec["impls"] if n in fns}
    if spec.get("aa") in fns:
        slots[aa_slot(spec["aa"])] = spec["aa"]
    if dev == "cpu" and spec.get("cpu_threads"):
        torch.set_num_threads(int(spec["cpu_threads"]))
    timer = CudaTimer(spec) if dev == "cuda" else None
    for k, shape in enumerate(spec["shapes"]):
        t_shape = _monotonic()
        rng = random.Random(spec.get("order_seed", 0) + k)

        def make(seed: int, dims=shape["dims"]) -> dict:
            g = torch.Generator(device=dev).manual_seed(seed)
            return make_inputs(dims, dtype, dev, g, "random")

        inputs = make(spec["input_seed"])
        if timer is not None:
            res = timer.shape(fns, slots, inputs, make, kwargs, rng)
        else:
            res = _time_cpu(fns, slots, inputs, kwargs, spec, rng)
        for slot, r in res.items():
            med, p20, p80 = quantiles(r["samples"])
            yield {
                "impl": slot,
                "shape": shape["label"],
                "dtype": spec["dtype"],
                "median_ms": med,
                "p20_ms": p20,
                "p80_ms": p80,
                "n": len(r["samples"]),
                "method": r["method"],
                "samples_ms": [round(x, 6) for x in r["samples"]],
                "timed_ms_total": r["total_ms"],
                "hidden_calls": r.get("hidden", 0),
                "mismatched_calls": r.get("mismatched", 0),
                "checked_calls": r.get("checked", 0),
                "profiler_ms": r.get("profiler_ms"),
                "shape_wall_s": round(_monotonic() - t_shape, 4),
            }


def _time_cpu(fns, slots, inputs, kwargs, spec, rng) -> dict:
    ref = {}
    for impl in dict.fromkeys(slots.values()):
        ref[impl] = fns[impl](**inputs, **kwargs).detach().clone()  # untimed: what every timed call must equal
        for _ in range(spec.get("cpu_warmup", 0)):
            fns[impl](**inputs, **kwargs)
    res = {s: {"samples": [], "total_ms": 0.0, "method": _cpu_method(), "mismatched": 0, "checked": 0} for s in slots}
    budget_s = spec.get("max_s_per_shape", 2.0)
    t_begin = _monotonic()
    reps = 0
    while reps < spec.get("cpu_reps", 1) and (
        reps < spec.get("cpu_min_reps", 1) or _monotonic() - t_begin < budget_s
    ):
        order = list(slots)
        rng.shuffle(order)
        for s in order:
            t0 = _perf()
            out = fns[slots[s]](**inputs, **kwargs)
            ms = (_perf() - t0) * 1e3
            res[s]["samples"].append(ms)
            res[s]["total_ms"] += ms
            res[s]["checked"] += 1
            res[s]["mismatched"] += not same_bytes(out, ref[slots[s]])
        reps += 1
    return res


def _cpu_method() -> str:
    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        return "interpreter wall-clock (does not count)"
    return f"cpu wall-clock, {torch.get_num_threads()} thread(s), interleaved"


