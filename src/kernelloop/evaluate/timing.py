"""Timing inside the worker: implementations interleaved on the same inputs.

For each shape, every implementation (candidate, best, baseline …) is called in rounds
A B C A B C …, so that clock and thermal drift hit all of them alike. On a GPU each timed
call is preceded by an L2 flush (a write larger than the cache) and bracketed by CUDA
events, with a device-wide synchronize before the end event: work a candidate hides on
a side stream is inside the measurement. On a CPU (Triton's interpreter) the numbers are
wall-clock and labelled as interpreter timings; they never count towards acceptance.
"""

from __future__ import annotations

import statistics
import time

import torch

L2_FLUSH_BYTES = 256 << 20  # > 4× the H200's 60 MB L2


def _quantiles(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return statistics.median(xs), q[1], q[7]  # median, p20, p80


def time_impls(job: dict, fns: dict, make_inputs) -> list[dict]:
    spec = job["timing"]
    dev = job["device"]
    out: list[dict] = []
    for shape in spec["shapes"]:
        dtype = getattr(torch, spec["dtype"])
        g = torch.Generator(device=dev).manual_seed(spec["input_seed"])
        inputs = make_inputs(shape["dims"], dtype, dev, g, "random")
        kwargs = {**job["params"], **spec["params"]}
        names = [n for n in spec["impls"] if n in fns]
        samples: dict[str, list[float]] = {n: [] for n in names}
        if dev == "cuda":
            method = _time_cuda(fns, names, inputs, kwargs, spec, samples)
        else:
            method = _time_cpu(fns, names, inputs, kwargs, spec, samples)
        for n in names:
            med, p20, p80 = _quantiles(samples[n])
            out.append(
                {
                    "impl": n,
                    "shape": shape["label"],
                    "dtype": spec["dtype"],
                    "median_ms": med,
                    "p20_ms": p20,
                    "p80_ms": p80,
                    "n": len(samples[n]),
                    "method": method,
                }
            )
    return out


def _time_cuda(fns, names, inputs, kwargs, spec, samples) -> str:
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    sync = torch.cuda.synchronize
    for n in names:  # warm-up: compilation and autotuning stay out of the numbers
        for _ in range(spec.get("warmup", 3)):
            fns[n](**inputs, **kwargs)
    sync()
    starts = [torch.cuda.Event(enable_timing=True) for _ in names]
    ends = [torch.cuda.Event(enable_timing=True) for _ in names]
    budget_s = spec.get("max_s_per_shape", 3.0)
    t_begin = time.monotonic()
    reps = 0
    while reps < spec.get("reps", 50) and (reps < spec.get("min_reps", 10) or time.monotonic() - t_begin < budget_s):
        for i, n in enumerate(names):
            flush.fill_(reps & 0xFF)
            starts[i].record()
            fns[n](**inputs, **kwargs)
            sync()  # device-wide: side-stream work is inside the interval
            ends[i].record()
        sync()
        for i, n in enumerate(names):
            samples[n].append(starts[i].elapsed_time(ends[i]))
        reps += 1
    return "cuda-events+device-sync, L2 flushed, interleaved"


def _time_cpu(fns, names, inputs, kwargs, spec, samples) -> str:
    for _ in range(spec.get("cpu_reps", 1)):
        for n in names:
            t0 = time.perf_counter()
            fns[n](**inputs, **kwargs)
            samples[n].append((time.perf_counter() - t0) * 1e3)
    return "interpreter wall-clock (does not count)"
