"""The GPU side of the timer, one implementation at a time (kernelloop.evaluate.worker.timing
explains the method): flush, spin, events with a device-wide end, matched calibration
calls, graph replay for tiny kernels, device-wide timing when work escapes the calling
stream, fresh inputs for every timed call with a commitment to its output, the profiler
as a second timer (gpu_device.py holds what the implementations share: the flush, the
spin, one flushed call, the idle probe).

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
from kernelloop.evaluate.protocol import call_seed
from kernelloop.evaluate.worker.calls import pack_output
from kernelloop.evaluate.worker.gpu_device import GpuDevice, raw

_monotonic = time.monotonic
_perf = time.perf_counter
_cuda_ok = torch.cuda.is_available()
_sync = torch.cuda.synchronize if _cuda_ok else (lambda: None)
_elapsed = torch.cuda.Event.elapsed_time
_Tensor = torch.Tensor

WARMUP_S = 0.05  # minimum warm-up time per implementation and shape


def _packed(out, copy: bool) -> torch.Tensor | None:
    """A unit's output as the one tensor committed to and kept (worker/calls.packed: a
    tuple's parts' bytes in order), copied when it lives in a graph's fixed buffer."""
    got = pack_output(out)
    return got.clone() if (copy and got is not None and type(out) is _Tensor) else got


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
