"""The GPU side of the timer, one implementation at a time (kernelloop.evaluate.worker.timing
explains the method): flush, spin, events with a device-wide end, matched calibration
calls, graph replay for tiny kernels, device-wide timing when work escapes the calling
stream, byte-for-byte re-checks of timed outputs, the profiler as a second timer, and the
idle probe that tells a non-candidate worker whether someone else's work is on the GPU.

`GpuSlot` reports raw event intervals; the trusted side turns them into samples
(kernelloop.evaluate.protocol.gpu_samples) and decides the method of every shape for all
implementations alike. Untrusted side: imported by the worker before any candidate
module, so the functions bound below are the harness's own.
"""

from __future__ import annotations

import statistics
import time

import torch

from kernelloop.evaluate.protocol import IDLE_TRIES, idle_busy

_monotonic = time.monotonic
_perf = time.perf_counter
_sleep = time.sleep
_cuda_ok = torch.cuda.is_available()
_sync = torch.cuda.synchronize if _cuda_ok else (lambda: None)
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_spin = getattr(torch.cuda, "_sleep", None)
_equal = torch.equal
_Tensor = torch.Tensor
_itemsize = {torch.int64: 8, torch.int32: 4, torch.int16: 2}

MIN_FLUSH_BYTES = 256 << 20  # used when the device does not report its L2 size
SPIN_CYCLES = 200_000  # ~0.1 ms at H200 clocks: longer than the host's launch of a call
WARMUP_S = 0.05  # minimum warm-up time per implementation and shape
PROBE_BYTES = 32 << 20  # the idle probe copies this much (~15 µs on an idle H200)


def same_bytes(out, ref: torch.Tensor) -> bool:
    """Whether a timed call returned exactly the bytes of the untimed call on the same
    inputs (NaN == NaN here: bytes, not values). Accepted kernels are deterministic —
    the determinism suite demands identical bytes for identical inputs and seed — so a
    difference means the candidate behaves differently while it is timed."""
    if type(out) is not _Tensor or out.shape != ref.shape or out.dtype != ref.dtype:
        return False
    a, b = (
        out.detach().reshape(-1).contiguous().view(torch.uint8),
        ref.reshape(-1).contiguous().view(torch.uint8),
    )
    for wide in (
        torch.int64,
        torch.int32,
        torch.int16,
    ):  # the same bytes, compared in wider words (4x faster on a CPU)
        if (
            a.numel() % _itemsize[wide] == 0
            and a.data_ptr() % _itemsize[wide] == 0
            and b.data_ptr() % _itemsize[wide] == 0
        ):
            return bool(_equal(a.view(wide), b.view(wide)))
    return bool(_equal(a, b))


class GpuDevice:
    """What every implementation timed in one process shares: the L2 flush buffer and the
    spin kernel's rate (cycles per ms, measured after an optional clock ramp)."""

    def __init__(self) -> None:
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.flush = torch.empty(
            max(MIN_FLUSH_BYTES, 4 * self.l2), dtype=torch.uint8, device="cuda"
        )
        self.cycles_per_ms = 0.0

    def measure_spin(self) -> None:
        """The spin kernel's rate at the current clocks (it sizes the matched calibration
        calls): measured with this worker alone on a warm GPU, never at idle clocks."""
        if _spin is None:
            return
        probes = []
        for _ in range(5):
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            _record(s)
            _spin(SPIN_CYCLES)
            _record(e)
            _sync()
            probes.append(_elapsed(s, e))
        self.cycles_per_ms = SPIN_CYCLES / max(statistics.median(probes), 1e-6)

    def ramp(self, seconds: float) -> None:
        """Hold the GPU busy so its clocks leave idle (the H200 sat at 345 MHz before runs)."""
        if _spin is None or seconds <= 0:
            return
        rate = (
            self.cycles_per_ms * 1e3 if self.cycles_per_ms > 0 else 2e9
        )  # ~2 GHz before calibration
        _spin(int(seconds * rate))
        _sync()

    def busy(self, spin: bool = True) -> None:
        self.flush.zero_()
        if not spin:
            _sync()  # an idle GPU at the start event: nothing the call launches can run before it
        elif _spin is not None:
            _spin(SPIN_CYCLES)

    def once(self, call, ref: torch.Tensor | None = None, spin: bool = True):
        """Events (start, stream end, device-synced end) of one call, flushed and launched
        behind a spin (or, with `spin=False`, from an idle GPU), whether the output equals
        `ref` (None without one; checked after the interval, outside the timing), and the
        output itself."""
        s, e, d = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
        self.busy(spin)
        _record(s)
        out = call()
        _record(e)
        _sync()  # device-wide: side-stream work finishes before d
        _record(d)
        return s, e, d, (None if ref is None else same_bytes(out, ref)), out

    def matched(self, ms: float):
        """A call that keeps the calling stream busy for `ms` and does nothing else."""
        if _spin is None or self.cycles_per_ms <= 0:
            return lambda: None
        cycles = max(1, int(ms * self.cycles_per_ms))
        return lambda: _spin(cycles)


def raw(ev) -> tuple[float, float]:
    """(stream interval, device-synced interval) in ms of one `GpuDevice.once` result."""
    return _elapsed(ev[0], ev[1]), _elapsed(ev[0], ev[2])


class IdleProbe:
    """A fixed copy kernel, timed by the host (launch to synchronize) and by events.

    Calibrated when a non-candidate worker starts, before any candidate code has run; run
    again before and after each of that worker's batches. Another process's kernels on
    the GPU (time-sliced with ours, or sharing its bandwidth under MPS) make it slower."""

    def __init__(self) -> None:
        n = PROBE_BYTES // 4
        self.src = torch.ones(n, dtype=torch.float32, device="cuda")
        self.dst = torch.empty_like(self.src)
        self.cal: dict[str, float] | None = None
        for _ in range(5):
            self.dst.copy_(self.src)
        _sync()

    def run(self, k: int = 3) -> list[tuple[float, float]]:
        out = []
        for _ in range(k):
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            _sync()
            t0 = _perf()
            _record(s)
            self.dst.copy_(self.src)
            _record(e)
            _sync()
            out.append(((_perf() - t0) * 1e3, _elapsed(s, e)))
        return out

    def check(self) -> list[list[tuple[float, float]]]:
        """Up to IDLE_TRIES probes, stopping at the first that looks idle (host jitter
        passes; someone else's work that lasts does not). The trusted side re-judges."""
        tries = []
        for i in range(IDLE_TRIES):
            got = self.run()
            tries.append(got)
            if self.cal is None or not idle_busy(got, self.cal):
                break
            if i + 1 < IDLE_TRIES:
                _sleep(0.002)
        return tries


class GpuSlot:
    """One implementation on one shape: its untimed output, warm-up, rough time, escape
    probe, method (per-call events behind a spin, device-wide from an idle GPU, or graph
    replay), batches of timed calls with matched calibrations, and the second timer."""

    def __init__(self, dev: GpuDevice, fn, inputs: dict, make, kwargs: dict, spec: dict) -> None:
        self.dev, self.fn, self.inputs, self.make, self.kwargs, self.spec = (
            dev,
            fn,
            inputs,
            make,
            kwargs,
            spec,
        )
        self.call = lambda: fn(**inputs, **kwargs)
        self.ref: torch.Tensor | None = None
        self.unit = self.call  # what one timed unit runs: one call, or one graph replay
        self.per_call_check = True
        self.spin = True
        self.matched_call = None
        self.count = 0  # timed units so far on this shape (calibration schedule)
        self.cals: list[tuple[float, float]] = []
        self.last: torch.Tensor | None = None
        self.graph_out: torch.Tensor | None = None

    def prepare(self) -> dict:
        out = self.call()
        _sync()  # work on any stream has finished: the reference is the call's real result
        self.ref = out.detach().clone()
        self.last = self.ref
        t_w, n, ev = _monotonic(), 0, None
        while n < self.spec.get("warmup", 3) or (
            _monotonic() - t_w < self.spec.get("warmup_s", WARMUP_S) and n < 1000
        ):
            ev = self.dev.once(self.call)[
                :4
            ]  # outputs are not held: the allocator reuses their block
            n += 1
        _sync()
        rough = _elapsed(ev[0], ev[1]) if ev else 0.0
        one = sum(
            t.numel() * t.element_size()
            for t in self.inputs.values()
            if isinstance(t, torch.Tensor)
        )
        return {"rough_ms": rough, "input_bytes": one, "l2_bytes": self.dev.l2, "warmup_calls": n}

    def rough(self, n: int = 3) -> float:
        evs = [self.dev.once(self.call)[:4] for _ in range(n)]
        _sync()
        return statistics.median(_elapsed(e[0], e[1]) for e in evs)

    def escape_probe(self, rough_ms: float) -> dict:
        """Calls from an idle GPU, each with a matched calibration (both as raw intervals)."""
        matched = self.dev.matched(rough_ms)
        runs = [
            (self.dev.once(self.call, spin=False)[:4], self.dev.once(matched, spin=False))
            for _ in range(5)
        ]
        _sync()
        return {"calls": [raw(c) for c, _ in runs], "cals": [raw(m) for _, m in runs]}

    def set_method(self, kind: str, sets: int = 1, n_calls: int = 1) -> dict:
        """events | device-wide | graph. A graph that cannot be captured answers ok=False
        (the trusted side then times every implementation per call)."""
        self.count, self.cals = 0, []
        self.unit, self.per_call_check, self.spin = (
            self.call,
            kind != "graph",
            kind != "device-wide",
        )
        if kind == "graph":
            try:
                self.unit = self._capture(sets, n_calls)
            except Exception as e:  # noqa: BLE001 - any capture failure means "time it per call"
                _sync()
                self.unit = self.call
                return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
        ev = self.dev.once(self.unit, spin=self.spin)  # one probe sizes the calibration call
        _sync()
        self.matched_call = self.dev.matched(_elapsed(ev[0], ev[1]))
        return {"ok": True, "error": ""}

    def _capture(self, sets: int, n_calls: int):
        """One CUDA graph: `n_calls` launches over rotating input sets (≥ 3× L2 in total, so
        each launch reads from DRAM), ending on set 0, whose output stays readable."""
        all_sets = [self.inputs] + [
            self.make(self.spec["input_seed"] + 1000 + i) for i in range(sets - 1)
        ]
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.fn(**all_sets[0], **self.kwargs)
        torch.cuda.current_stream().wait_stream(side)
        out = None
        with torch.cuda.graph(g):
            for i in range(1, n_calls + 1):
                out = self.fn(**all_sets[i % len(all_sets)], **self.kwargs)
        _sync()
        self.graph_out = out
        return g.replay

    def batch(self, n: int, cal_every: int) -> dict:
        """`n` timed units; a matched calibration before every `cal_every`-th one."""
        evs, cals = [], []
        mismatched = checked = 0
        last = None
        for _ in range(n):
            if self.count % max(1, cal_every) == 0:
                cals.append(self.dev.once(self.matched_call, spin=self.spin))
            # only the batch's last output is kept: earlier ones free their block as before
            last = None
            ev = self.dev.once(self.unit, self.ref if self.per_call_check else None, spin=self.spin)
            last = ev[4]
            evs.append(ev[:4])
            if ev[3] is not None:
                checked += 1
                mismatched += ev[3] is False
            self.count += 1
            del ev
        _sync()
        self.last = last if self.per_call_check else self.graph_out
        cal_raw = [raw(c) for c in cals]
        self.cals += cal_raw
        return {
            "calls": [raw(e) for e in evs],
            "cals": cal_raw,
            "mismatched": mismatched,
            "checked": checked,
        }

    def top_up(self, at_least: int = 3) -> list[tuple[float, float]]:
        extra = [
            self.dev.once(self.matched_call, spin=self.spin)
            for _ in range(max(0, at_least - len(self.cals)))
        ]
        _sync()
        got = [raw(c) for c in extra]
        self.cals += got
        return got

    def profile(self) -> float | None:
        """Second timer: the profiler's summed kernel durations per call, with rotating
        input sets (≥ 2× L2 in total) in place of a flush, so that every kernel in the
        trace belongs to the call."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        one = sum(
            t.numel() * t.element_size()
            for t in self.inputs.values()
            if isinstance(t, torch.Tensor)
        )
        n_sets = max(1, min(64, -(-2 * max(self.dev.l2, 1 << 20) // max(one, 1))))
        sets = [self.inputs] + [
            self.make(self.spec["input_seed"] + 1000 + i) for i in range(n_sets - 1)
        ]
        n = max(10, len(sets))
        try:
            _sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i in range(n):
                    self.fn(**sets[i % len(sets)], **self.kwargs)
                _sync()
            us = sum(
                e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA
            )
        except Exception:  # noqa: BLE001 - the second timer is advisory; absence is recorded
            return None
        return us / n / 1e3 if us > 0 else None
