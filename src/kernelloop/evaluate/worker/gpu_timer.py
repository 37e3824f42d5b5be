"""The GPU side of the timer, one implementation at a time (kernelloop.evaluate.worker.timing
explains the method): flush, spin, events with a device-wide end, matched calibration
calls, graph replay for tiny kernels, device-wide timing when work escapes the calling
stream, fresh inputs for every timed call with a commitment to its output, the profiler
as a second timer, and the idle probe that tells a non-candidate worker whether someone
else's work is on the GPU.

`GpuSlot` reports raw event intervals; the trusted side turns them into samples
(kernelloop.evaluate.protocol.gpu_samples) and decides the method of every shape for all
implementations alike. Untrusted side: imported by the worker before any candidate
module, so the functions bound below are the harness's own.
"""

from __future__ import annotations

import statistics
import time

import torch

from kernelloop.evaluate.commitment import Commits, digest
from kernelloop.evaluate.protocol import IDLE_TRIES, call_seed, idle_busy
from kernelloop.evaluate.worker.calls import pack_output

_monotonic = time.monotonic
_perf = time.perf_counter
_sleep = time.sleep
_cuda_ok = torch.cuda.is_available()
_sync = torch.cuda.synchronize if _cuda_ok else (lambda: None)
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_spin = getattr(torch.cuda, "_sleep", None)
RAMP_CHUNK_S = 0.02  # one spin of the clock ramp (GpuDevice.ramp)
RAMP_STEADY = 3  # chunks in a row that last the same to 1%: the clocks have settled
_Tensor = torch.Tensor

MIN_FLUSH_BYTES = 256 << 20  # used when the device does not report its L2 size
SPIN_CYCLES = 200_000  # ~0.1 ms at H200 clocks: longer than the host's launch of a call
WARMUP_S = 0.05  # minimum warm-up time per implementation and shape
PROBE_BYTES = 32 << 20  # the idle probe copies this much (~15 µs on an idle H200)


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
        """Hold the GPU busy until its clocks are steady, for at most `seconds` (the H200 sat
        at 345 MHz before runs). A fixed 0.2 s left the first shape of a benchmark on the
        ramp: the flagship's 16384x8192 row had 6.0% noise against 0.05-0.2% for the others
        and the gate's threshold rose to 1.063x (issue 34). Spin cycles take less time as
        the clock rises, so the spin goes on in ~20 ms chunks until three in a row last the
        same to 1% — or the time is up."""
        if _spin is None or seconds <= 0:
            return
        rate = (
            self.cycles_per_ms * 1e3 if self.cycles_per_ms > 0 else 2e9
        )  # ~2 GHz before calibration
        chunk_s = min(RAMP_CHUNK_S, seconds)
        cycles = max(int(chunk_s * rate), 1)
        deadline = time.perf_counter() + seconds
        prev, steady = 0.0, 0
        while time.perf_counter() < deadline and steady < RAMP_STEADY:
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            _record(s)
            _spin(cycles)
            _record(e)
            _sync()
            ms = s.elapsed_time(e)
            steady = steady + 1 if prev > 0 and abs(ms - prev) <= 0.01 * prev else 0
            prev = ms
        _sync()

    def busy(self, spin: bool = True) -> None:
        self.flush.zero_()
        if not spin:
            _sync()  # an idle GPU at the start event: nothing the call launches can run before it
        elif _spin is not None:
            _spin(SPIN_CYCLES)

    def once(self, call, spin: bool = True):
        """Events (start, stream end, device-synced end) of one call, flushed and launched
        behind a spin (or, with `spin=False`, from an idle GPU), None (kept for the tuple's
        layout) and the output itself."""
        s, e, d = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
        self.busy(spin)
        _record(s)
        out = call()
        _record(e)
        _sync()  # device-wide: side-stream work finishes before d
        _record(d)
        return s, e, d, None, out

    def matched(self, ms: float):
        """A call that keeps the calling stream busy for `ms` and does nothing else."""
        if _spin is None or self.cycles_per_ms <= 0:
            return lambda: None
        cycles = max(1, int(ms * self.cycles_per_ms))
        return lambda: _spin(cycles)


def _packed(out, copy: bool) -> torch.Tensor | None:
    """A unit's output as the one tensor committed to and kept (worker/calls.packed: a
    tuple's parts' bytes in order), copied when it lives in a graph's fixed buffer."""
    got = pack_output(out)
    return got.clone() if (copy and got is not None and type(out) is _Tensor) else got


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


def _kineto():
    """The profiler with CUDA kernel events, through torch.autograd.profiler: the same
    events `torch.profiler.profile` collects, without its wrappers in `torch._disable_dynamo`,
    whose first use imports torch._dynamo (measured on the H200, 2026-12-02,
    benchmarks/worker_profile.py: ~6 s of each profiled worker's first `profile` turn,
    most of it compiling modules that had no bytecode cache, while every other worker was
    stopped; after the change the turns took 13-29 ms)."""
    from torch.autograd.profiler import profile

    return profile(use_device="cuda", use_kineto=True)


class GpuSlot:
    """One implementation on one shape: its untimed output, warm-up, rough time, escape
    probe, method (per-call events behind a spin, device-wide from an idle GPU, or graph
    replay), batches of timed calls with matched calibrations, and the second timer."""

    def __init__(self, dev: GpuDevice, fn, inputs: dict, make, kwargs: dict, spec: dict) -> None:
        self.dev, self.fn, self.make, self.kwargs, self.spec = dev, fn, make, kwargs, spec
        self.inputs = inputs  # replaced before every timed call (refilled in place for graphs)
        self.call = lambda: fn(**self.inputs, **kwargs)
        self.unit = self.call  # what one timed unit runs: one call, or one graph replay
        self.graph = False
        self.spin = True
        self.matched_call = None
        self.count = 0  # timed units so far on this shape (calibration schedule)
        self.cals: list[tuple[float, float]] = []
        self.last: torch.Tensor | None = None
        self.kept: list[torch.Tensor] = []  # the last batch's outputs, one per timed unit
        self.graph_out: torch.Tensor | None = None

    def prepare(self) -> dict:
        out = self.call()
        _sync()  # work on any stream has finished
        self.last = out
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
        self.unit, self.graph, self.spin = self.call, kind == "graph", kind != "device-wide"
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

    def _fresh(self, seed: int) -> None:
        """Inputs of the next timed unit (untimed). A captured graph reads fixed buffers:
        they are refilled in place."""
        new = self.make(seed)
        if not self.graph:
            self.inputs = new
        else:
            for k, t in self.inputs.items():
                if isinstance(t, _Tensor):
                    t.copy_(new[k])
        # made before the call starts: a call reading them from another stream sees them whole
        _sync()

    def batch(self, n: int, cal_every: int, seed: int, key: int) -> dict:
        """`n` timed units, each on inputs of its own (from the batch's secret seed), with a
        matched calibration before every `cal_every`-th one. Right after each unit — still
        inside the batch the trusted clock is timing — its output is kept and committed to
        (kernelloop.evaluate.commitment); the trusted side audits some of them afterwards."""
        evs, cals, commits = [], [], []
        self.kept = []  # the previous batch's outputs are released first
        for j in range(n):
            if self.count % max(1, cal_every) == 0:
                cals.append(self.dev.once(self.matched_call, spin=self.spin))
            self._fresh(call_seed(seed, j))
            ev = self.dev.once(self.unit, spin=self.spin)
            out = _packed(self.graph_out if self.graph else ev[4], self.graph)
            evs.append(ev[:4])
            del ev
            commits.append(digest(out, key) if out is not None else "")
            self.kept.append(out)
            self.count += 1
        _sync()
        self.last = self.kept[-1] if self.kept else None
        cal_raw = [raw(c) for c in cals]
        self.cals += cal_raw
        return {"calls": [raw(e) for e in evs], "cals": cal_raw, "commits": commits}

    def through(self, n: int, seed: int, key: int, mark=None) -> dict:
        """`n` timed units run through for the trusted clock alone (nothing is reported but
        the commitments). First the inputs of every unit are made (from the batch's secret
        seed, as in `batch`); then the units are queued back to back, each followed by the
        launch of its output's commitment, with no host wait and no flush in between —
        nothing a worker could leave out to look faster. Between the two, `mark()` tells
        the trusted side the inputs are made: its clock splits the batch there (the units'
        window is what the events are held to; the inputs' window is held to the others').
        Queued this way the host stays
        ahead of the GPU for any unit longer than its launch (~0.1 ms), so the trusted wall
        time per unit is the unit plus the same harness work for every implementation: what
        the events of `batch` must agree with (trusted/through_checks.through_check). Every
        unit's inputs and output stay alive until the end: a call still reading them from
        another stream never sees their memory reused. With the device-wide method (work
        escaping the calling stream) each unit is waited for, as in `batch`.

        Measured on the H200 (2026-12-01) in the first layout — inputs made, L2 flushed and
        the unit queued per unit — the host's work per unit (~0.8 ms of Python making
        inputs) outran a 0.12 ms kernel, so a fast honest kernel looked slower to the trusted
        clock than its events said; hence inputs first, and a host wait before the units.
        Without that wait (tried on the H200, 2026-12-01, to hide a short unit's launch path
        behind the GPU's work on the inputs) the overlap of host and GPU differed between
        implementations: the honest tiled GEMM's time at 128x4096x4096 and 1000x3000x1000
        was raised 3-7x, and a lie of 20% on the flagship was raised by too little. A unit
        shorter than its own launch path shows that host time instead
        (through_checks.THROUGH_HOST_MS)."""
        t0 = _perf()
        sets = [self.make(call_seed(seed, j)) for j in range(n)]
        commits = Commits(key, n, "cuda")
        self.kept = []
        _sync()
        t1 = _perf()
        if mark is not None:
            mark()
        for j, new in enumerate(sets):
            if self.graph:
                for k, t in self.inputs.items():
                    if isinstance(t, _Tensor):
                        t.copy_(new[k])
                self.unit()
                out = _packed(self.graph_out, True)
            else:
                out = _packed(self.fn(**new, **self.kwargs), False)
            if not self.spin:
                _sync()
            if out is not None:
                commits.launch(j, out)
            self.kept.append(out)
        _sync()
        t2 = _perf()
        self.last = self.kept[-1] if self.kept else None
        # The worker's own view of its phases (inputs, units): a diagnostic the trusted
        # side records for benchmarks/through_power.py and never checks anything against.
        return {"commits": commits.texts(), "phases_ms": [(t1 - t0) * 1e3, (t2 - t1) * 1e3]}

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
            with _kineto() as prof:
                for i in range(n):
                    self.fn(**sets[i % len(sets)], **self.kwargs)
                _sync()
            us = sum(
                e.time_range.elapsed_us()
                for e in prof.function_events
                if e.device_type == DeviceType.CUDA
            )
        except Exception:  # noqa: BLE001 - the second timer is advisory; absence is recorded
            return None
        return us / n / 1e3 if us > 0 else None
