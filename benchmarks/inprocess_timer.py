"""The in-process timer as it was before timing moved out of the candidate's process
(src/kernelloop/evaluate/worker/{timing,gpu_timer}.py at commit 53f2d2d), kept only so
that benchmark scripts can compare the two layouts in one run (benchmarks/timing_layout.py)
and re-run older measurements (anchors.py, bench_acceptance.py). Not used by kernelloop:
every implementation here runs in one process, which is exactly what a hostile candidate
could exploit.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Iterator

import torch

from kernelloop.evaluate.protocol import aa_slot, quantiles
from kernelloop.evaluate.trusted.clock.bench_record import (
    BenchmarkRecord,
    ImplTiming,
    ShapeBench,
    noise,
)

_monotonic = time.monotonic
_cuda_ok = torch.cuda.is_available()
_sync = torch.cuda.synchronize if _cuda_ok else (lambda: None)
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_spin = getattr(torch.cuda, "_sleep", None)
_equal = torch.equal
_Tensor = torch.Tensor


def same_bytes(out, ref: torch.Tensor) -> bool:
    """Whether a timed call returned exactly the bytes of the untimed call on the same
    inputs (NaN == NaN here: bytes, not values). Accepted kernels are deterministic —
    the determinism suite demands identical bytes for identical inputs and seed — so a
    difference means the candidate behaves differently while it is timed."""
    if type(out) is not _Tensor or out.shape != ref.shape or out.dtype != ref.dtype:
        return False
    a, b = out.detach().reshape(-1).contiguous(), ref.reshape(-1)
    return bool(_equal(a.view(torch.uint8), b.view(torch.uint8)))


MIN_FLUSH_BYTES = 256 << 20  # used when the device does not report its L2 size
SPIN_CYCLES = 200_000  # ~0.1 ms at H200 clocks: longer than the host's launch of a call
RAMP_S = 0.2  # GPU held busy before the first shape: clocks leave idle (345 MHz seen)
WARMUP_S = 0.05  # minimum warm-up time per implementation and shape
CALIBRATE_EVERY = 2  # one matched calibration call per this many rounds
JITTER_CAP_MS = 0.05  # the calibration's jitter widens the hidden-work slack by at most this
GRAPH_BELOW_MS = 0.015  # per-call events are too coarse below this (launch ~5 µs, event ~0.5 µs)
GRAPH_MIN_RATIO = 0.25  # a replayed call this much faster than the call timed alone lost work
HIDDEN_SLACK = (1.02, 0.005)  # device-synced time may exceed stream time by 2% + 5 µs


def _pick(tight: float, synced: float, overhead: float, jitter: float = 0.0) -> tuple[float, bool]:
    """The stream-timed interval, unless the device-synced one shows hidden work.

    `synced - overhead` is the interval to the moment the whole device went idle; an
    honest call differs from `tight` only by jitter (`jitter`: the calibration's own
    p90 - median). More than the slack means work ran outside the calling stream, and
    then the longer, device-wide number is the truth.
    """
    wide = synced - overhead
    if wide > tight * HIDDEN_SLACK[0] + HIDDEN_SLACK[1] + jitter:
        return wide, True
    return tight, False


class CudaTimer:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.flush = torch.empty(
            max(MIN_FLUSH_BYTES, 4 * self.l2), dtype=torch.uint8, device="cuda"
        )
        self.cycles_per_ms = 0.0
        if _spin is not None:
            _spin(
                int(spec.get("ramp_s", RAMP_S) * 2e9)
            )  # ~RAMP_S at 2 GHz; longer while clocks ramp
            _sync()
            probes = []
            for _ in range(5):
                s, e = _Event(enable_timing=True), _Event(enable_timing=True)
                _record(s)
                _spin(SPIN_CYCLES)
                _record(e)
                _sync()
                probes.append(_elapsed(s, e))
            self.cycles_per_ms = SPIN_CYCLES / max(statistics.median(probes), 1e-6)

    def _busy(self, spin: bool = True) -> None:
        self.flush.zero_()
        if not spin:
            _sync()  # an idle GPU at the start event: nothing the call launches can run before it
        elif _spin is not None:
            _spin(SPIN_CYCLES)

    def _once(self, call, ref: torch.Tensor | None = None, spin: bool = True):
        """Events (start, stream end, device-synced end) of one call, flushed and launched
        behind a spin (or, with `spin=False`, from an idle GPU), and whether the output
        equals `ref` (None without one; checked after the interval, outside the timing)."""
        s, e, d = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
        self._busy(spin)
        _record(s)
        out = call()
        _record(e)
        _sync()  # device-wide: side-stream work finishes before d
        _record(d)
        return s, e, d, (None if ref is None else same_bytes(out, ref))

    def shape(self, fns, slots, inputs, make, kwargs, rng) -> dict:
        spec = self.spec
        impls = list(dict.fromkeys(slots.values()))
        rough, ref = {}, {}
        for impl in impls:  # untimed reference output; every timed per-call output must equal it
            out = fns[impl](**inputs, **kwargs)
            _sync()  # work on any stream has finished: the reference is the call's real result
            ref[impl] = out.detach().clone()
        for impl in impls:  # warm-up: compilation and autotuning stay out of the numbers
            t_w, n = _monotonic(), 0
            while n < spec.get("warmup", 3) or (
                _monotonic() - t_w < spec.get("warmup_s", WARMUP_S) and n < 1000
            ):
                ev = self._once(lambda f=fns[impl]: f(**inputs, **kwargs))
                n += 1
            _sync()
            rough[impl] = _elapsed(ev[0], ev[1])
        method, calls = (
            "events",
            {s: (lambda f=fns[slots[s]]: f(**inputs, **kwargs)) for s in slots},
        )
        res = None
        # A call whose stream time is this short either is tiny or hides its work on
        # another stream. Hidden work can start while the pre-call spin still runs, so the
        # spin's window hides up to ~0.17 ms of it from the events: a shape where the probe
        # finds work outside the calling stream is timed device-wide from an idle GPU (all
        # slots alike, launch included); otherwise it is timed by graph replay. Longer
        # calls keep the per-call check of `_pick`, and the profiler's durations in bench.
        small = spec.get("graphs", True) and min(rough.values()) < spec.get(
            "graph_below_ms", GRAPH_BELOW_MS
        )
        escapes = small and self._escapes(fns, impls, inputs, kwargs, rough)
        if escapes:
            method = "device-wide"
        elif small:
            graphs = self._graphs(fns, slots, inputs, make, kwargs)
            if graphs is not None:
                res = self._rounds(graphs[0], graphs[1], rng)
                # A replay far faster than the same call timed alone lost work at capture
                # (a candidate that behaved through the warm-up): time it per call.
                if all(
                    statistics.median(res[s]["samples"]) >= GRAPH_MIN_RATIO * rough[slots[s]]
                    for s in slots
                ):
                    method = f"graph:{graphs[1]}"
                else:
                    res = None
        if res is None:
            res = self._rounds(
                calls, 1, rng, {s: ref[slots[s]] for s in slots}, device_wide=escapes
            )
        for r in res.values():
            r["method"] = _method_text(method)
        for impl in spec.get("profile", []):
            if impl in fns:
                pm = self._profile(fns[impl], inputs, make, kwargs)
                for s, i in slots.items():
                    if i == impl:
                        res[s]["profiler_ms"] = pm
        return res

    def _escapes(self, fns, impls, inputs, kwargs, rough) -> bool:
        """Whether any implementation leaves work outside the calling stream.

        Probed from an idle GPU (no spin), so nothing the call launches can run before the
        start event. Graph capture records only the capturing stream's work: kernels a
        candidate launches on an unrelated stream run once, eagerly, during capture, and
        the replays time nothing (0.06 µs per call "measured" on the H200); and behind the
        pre-call spin, side-stream work overlapping the spin is not seen by the events.
        """
        for impl in impls:
            call, matched = (lambda f=fns[impl]: f(**inputs, **kwargs)), self._matched(rough[impl])
            runs = [
                (self._once(call, spin=False), self._once(matched, spin=False)) for _ in range(5)
            ]
            _sync()
            overhead, jitter = _sync_latency([c for _, c in runs])
            if (
                sum(
                    _pick(_elapsed(r[0], r[1]), _elapsed(r[0], r[2]), overhead, jitter)[1]
                    for r, _ in runs
                )
                >= 3
            ):
                return True
        return False

    def _matched(self, ms: float):
        """A call that keeps the calling stream busy for `ms` and does nothing else."""
        if _spin is None or self.cycles_per_ms <= 0:
            return lambda: None
        cycles = max(1, int(ms * self.cycles_per_ms))
        return lambda: _spin(cycles)

    def _rounds(
        self, calls: dict, per_replay: int, rng, refs: dict | None = None, device_wide: bool = False
    ) -> dict:
        """Interleaved rounds. `refs` (per-call events only; a graph replay runs no Python,
        so it cannot change behaviour while timed) checks every timed output. With
        `device_wide`, every call starts from an idle GPU and counts to the device-wide end."""
        spin = not device_wide
        spec = self.spec
        slots = list(calls)
        matched = {}
        for s in slots:  # one probe per slot sizes its calibration call
            ev = self._once(calls[s], spin=spin)
            _sync()
            matched[s] = self._matched(_elapsed(ev[0], ev[1]))
        raw: dict[str, list] = {s: [] for s in slots}
        cal: dict[str, list] = {s: [] for s in slots}
        budget_s = spec.get("max_s_per_shape", 2.0)
        every = spec.get("calibrate_every", CALIBRATE_EVERY)
        t_begin = _monotonic()
        reps = 0
        while reps < spec.get("reps", 50) and (
            reps < spec.get("min_reps", 10) or _monotonic() - t_begin < budget_s
        ):
            order = list(slots)
            rng.shuffle(order)
            for s in order:
                raw[s].append(self._once(calls[s], refs[s] if refs else None, spin=spin))
            if reps % every == 0:  # the host's sync-and-record latency after a wait this long
                c = slots[(reps // every) % len(slots)]
                cal[c].append(self._once(matched[c], spin=spin))
            reps += 1
        for s in slots:
            while len(cal[s]) < 3:
                cal[s].append(self._once(matched[s], spin=spin))
        _sync()
        res = {}
        for s, evs in raw.items():
            med, jitter = _sync_latency(cal[s])
            samples, hidden, total = [], 0, 0.0
            for st, e, d, _same in evs:
                x, h = _pick(_elapsed(st, e), _elapsed(st, d), med, jitter)
                if device_wide:
                    x = max(_elapsed(st, d) - med, _elapsed(st, e))
                samples.append(x / per_replay)
                hidden += h
                total += x
            res[s] = {
                "samples": samples,
                "hidden": hidden,
                "total_ms": total,
                "mismatched": sum(ev[3] is False for ev in evs),
                "checked": sum(ev[3] is not None for ev in evs),
                "sync_overhead_ms": round(med, 5),
                "sync_jitter_ms": round(jitter, 5),
            }
        return res

    def _input_sets(self, inputs: dict, make, min_total: int, max_sets: int) -> list[dict]:
        one = sum(
            t.numel() * t.element_size() for t in inputs.values() if isinstance(t, torch.Tensor)
        )
        n = max(1, min(max_sets, math.ceil(min_total / max(one, 1))))
        return [inputs] + [make(self.spec["input_seed"] + 1000 + i) for i in range(n - 1)]

    def _graphs(self, fns, slots, inputs, make, kwargs):
        """One CUDA graph per slot: `calls` launches over rotating input sets (≥ 3× L2
        in total, so each launch reads from DRAM), replayed as one timed unit. None when
        a candidate cannot be captured (host syncs, unjoined side streams): the caller
        falls back to per-call events for every slot, so they stay comparable."""
        sets = self._input_sets(inputs, make, 3 * max(self.l2, 1 << 20), 256)
        n_calls = max(20, len(sets))
        out = {}
        try:
            for s, impl in slots.items():
                g = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    fns[impl](**sets[0], **kwargs)
                torch.cuda.current_stream().wait_stream(side)
                with torch.cuda.graph(g):
                    for i in range(n_calls):
                        fns[impl](**sets[i % len(sets)], **kwargs)
                out[s] = g.replay
            _sync()
        except Exception:  # noqa: BLE001 - any capture failure means "time it per call"
            _sync()
            return None
        return out, n_calls

    def _profile(self, fn, inputs, make, kwargs) -> float | None:
        """Second timer: the profiler's summed kernel durations per call, with rotating
        input sets (≥ 2× L2 in total) in place of a flush, so that every kernel in the
        trace belongs to the call."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        sets = self._input_sets(inputs, make, 2 * max(self.l2, 1 << 20), 64)
        n = max(10, len(sets))
        try:
            _sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i in range(n):
                    fn(**sets[i % len(sets)], **kwargs)
                _sync()
            us = sum(
                e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA
            )
        except Exception:  # noqa: BLE001 - the second timer is advisory; absence is recorded
            return None
        return us / n / 1e3 if us > 0 else None


def _sync_latency(calibrations: list) -> tuple[float, float]:
    """(median, jitter) of the host's sync-and-record latency from matched calibration
    calls: jitter is p90 - median, capped at JITTER_CAP_MS."""
    over = sorted(_elapsed(e, d) for _, e, d, _ in calibrations)
    med = statistics.median(over)
    p90 = over[min(len(over) - 1, math.ceil(0.9 * len(over)) - 1)]
    return med, min(JITTER_CAP_MS, max(0.0, p90 - med))


def _method_text(method: str) -> str:
    if method == "device-wide":
        return (
            "device-wide per call (work seen outside the calling stream): L2 flushed, idle GPU at "
            "the start event, end after a device synchronize, host launch included, interleaved"
        )
    if method.startswith("graph:"):
        return (
            f"cuda-graph replay of {method.split(':')[1]} calls over rotating input sets > 3x L2, "
            "interleaved"
        )
    return "cuda-events, L2 flushed + spin before each call, device-synced, interleaved"


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
        ref[impl] = (
            fns[impl](**inputs, **kwargs).detach().clone()
        )  # untimed: what every timed call must equal
        for _ in range(spec.get("cpu_warmup", 0)):
            fns[impl](**inputs, **kwargs)
    res = {
        s: {"samples": [], "total_ms": 0.0, "method": _cpu_method(), "mismatched": 0, "checked": 0}
        for s in slots
    }
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


def timing_spec(
    shapes,
    dtype: str,
    impls: list[str],
    device: str,
    aa: str | None,
    profile: list[str],
    reps: int | None = None,
    max_s: float | None = None,
    params: dict | None = None,
) -> dict:
    """The spec the old benchmark() sent its single worker (its settings, seeds fixed by the
    caller)."""
    return {
        "shapes": [{"dims": s.dims, "label": s.label} for s in shapes],
        "dtype": dtype,
        "impls": impls,
        "aa": aa,
        "profile": profile if device == "cuda" else [],
        "params": params or {},
        "input_seed": 7,
        "order_seed": 11,
        "reps": reps or 400,
        "min_reps": 20,
        "warmup": 3,
        "warmup_s": 0.05,
        "max_s_per_shape": max_s or (0.6 if device == "cuda" else 0.8),
        "cpu_reps": reps or 200,
        "cpu_min_reps": 15,
        "cpu_warmup": 2,
        "cpu_threads": 1,
    }


def record_from_messages(
    rec: BenchmarkRecord, task, shapes, dtype: str, messages: list[dict]
) -> None:
    """Fill `rec.shapes` from `time_impls` messages (statistics recomputed from the samples)."""
    by_shape: dict[str, list[dict]] = {}
    for m in messages:
        by_shape.setdefault(m["shape"], []).append(m)
    for shape in shapes:
        sb = ShapeBench(shape=shape.label, dtype=dtype, weight=shape.weight, tag=shape.tag)
        for m in by_shape.get(shape.label, []):
            med, p20, p80 = quantiles(m["samples_ms"])
            sb.impls[m["impl"]] = ImplTiming(
                impl=m["impl"],
                median_ms=med,
                p20_ms=p20,
                p80_ms=p80,
                n=len(m["samples_ms"]),
                method=m["method"],
                hidden_calls=m["hidden_calls"],
                samples_ms=m["samples_ms"],
            )
        sb.noise_rel, sb.aa_rel_diff = noise(sb, rec.best, rec.aa_impl)
        rec.shapes.append(sb)
