"""The GPU itself as the timer sees it, shared by every implementation timed in one worker:
the L2 flush buffer, the spin kernel's rate and the clock ramp, one flushed call behind a
spin (`GpuDevice.once`) and its raw event intervals, and the idle probe that tells a
non-candidate worker whether someone else's work is on the GPU (gpu_timer.py's `GpuSlot`
times one implementation on one shape with them).

Untrusted side: imported by the worker (through gpu_timer) before any candidate module,
so the functions bound below are the harness's own; guard.Integrity watches this module
as it watches gpu_timer.
"""

from __future__ import annotations

import statistics
import time

import torch

from kernelloop.evaluate.protocol import IDLE_TRIES, idle_busy

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

MIN_FLUSH_BYTES = 256 << 20  # used when the device does not report its L2 size
SPIN_CYCLES = 200_000  # ~0.1 ms at H200 clocks: longer than the host's launch of a call
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
