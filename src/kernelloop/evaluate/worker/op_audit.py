"""The op audit and the launch counter: what the worker (untrusted side) records about a
call's launches and PyTorch ops — the dispatch-mode recorder, the RecordFunction trace
(with the GPU's kernels where a call is marked to count them) and the timed launch audit.
Policy, never a defence: the candidate runs in this process (docs/evaluate.md)."""

from __future__ import annotations

import os
from collections import Counter

import torch
from torch.autograd.profiler import profile as _profile
from torch.utils._python_dispatch import TorchDispatchMode

from kernelloop.evaluate.protocol import RNG_PACKETS

# Kineto (torch 2.13) writes "profiler_start"/"profiler_stop" lines to stderr at every
# start and stop at its default level; the worker's stderr is the record's log tail.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
# The range every counted launch runs in while the op trace is on: aten ops inside it are
# the launcher's (the interpreter copies arguments through torch), not the candidate's.
LAUNCH_MARK = "kernelloop::launch"
_RecordFunctionFast = (
    getattr(torch._C._profiler, "_RecordFunctionFast", None)
    or torch.autograd.profiler.record_function
)


class AtenRecorder(TorchDispatchMode):
    """Records the aten ops a call dispatches outside Triton launches (name -> count).

    Ops dispatched while a Triton launch is in progress belong to the launcher (the
    interpreter copies arguments through torch), not to the candidate.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in dynamo.disable, which imports
        # torch._dynamo (and sympy) on the first dispatch: ~1.3 s of every worker's start
        # on the CPU, for a guard against dynamo tracing that no worker does.
        return False

    def __init__(self, counter: LaunchCounter | None = None) -> None:
        super().__init__()
        self.ops: dict[str, int] = {}
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counter is None or self.counter.depth == 0:
            name = func.overloadpacket.__name__
            if name in RNG_PACKETS:  # which overload decides (protocol.RNG_FILL_OPS)
                name = f"{name}.{func._overloadname}"
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


class LaunchCounter:
    """Counts launches of the Triton kernels each implementation's module defines.

    The kernel object's `run` is wrapped on the instance (both the compiled JITFunction
    and the interpreter's InterpretedFunction launch through `run`).
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()  # per implementation, never reset
        self.kernels: Counter[str] = Counter()  # kernels attached per implementation
        self.depth = 0
        self.runs = 0  # every launch, warm-up included (the op trace's marks must match it)
        self.marking = False  # set by OpTrace: launches then run inside LAUNCH_MARK

    def attach(self, module, impl: str) -> None:
        for attr, obj in list(vars(module).items()):
            kernel = obj
            while hasattr(kernel, "fn") and not (
                hasattr(kernel, "run") and hasattr(kernel, "add_pre_run_hook")
            ):
                kernel = kernel.fn
            if hasattr(kernel, "run") and hasattr(kernel, "add_pre_run_hook"):
                kernel.run = self._wrap(kernel.run, f"{impl}:{attr}", impl)
                self.kernels[impl] += 1

    def attached(self, impl: str) -> bool:
        return self.kernels[impl] > 0

    def _wrap(self, run, key: str, impl: str):
        def counted(*args, **kwargs):
            if not kwargs.get("warmup", False):
                self.counts[key] += 1
                self.totals[impl] += 1
            self.runs += 1
            self.depth += 1
            try:
                if self.marking:
                    with _RecordFunctionFast(LAUNCH_MARK):
                        return run(*args, **kwargs)
                return run(*args, **kwargs)
            finally:
                self.depth -= 1

        return counted

    def reset(self) -> None:
        self.counts.clear()

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)


def _trace_config():
    from torch._C._profiler import _ExperimentalConfig

    try:  # ops run on a thread the candidate starts count too (torch >= 2.7)
        return _ExperimentalConfig(profile_all_threads=True)
    except TypeError:
        return _ExperimentalConfig()


class OpTrace:
    """The second layer of the op audit: the C++ RecordFunction observers behind
    torch.profiler (CPU activity) record every aten op the call dispatches.

    `AtenRecorder` is a Python dispatch mode, and the candidate's own code can take it off
    the stack: under `torch.utils._python_dispatch._disable_current_modes()` a candidate
    computing everything in PyTorch (plus one trivial copy kernel) passed every check
    (issue 12). RecordFunction observers sit in the dispatcher, not on that stack. This
    still runs in the candidate's process, so it is policy, never a defence: a candidate
    that stops the profiler is reported (`trace_error`), one that forges launch marks
    is caught by the mark count, and more effort than that defeats it.

    Reports every aten op outside a launch at any depth (name -> count): an allowed wrapper
    (`contiguous`, `to`) that does real work shows the work as a nested op (`clone`,
    `_to_copy`), and compute cannot hide inside an allowed op's scope.
    """

    def __init__(self, counter: LaunchCounter, device_kernels: bool = False) -> None:
        self.counter = counter
        self.ops: dict[str, int] = {}
        self.error = ""
        self._prof = None
        self._runs = 0
        # With `device_kernels` the trace also takes the GPU's activity (CUPTI) and counts
        # the kernels the call ran: a C++ extension's <<<>>> launches included.
        self.device_kernels = device_kernels
        self.kernels: int | None = None

    def __enter__(self) -> OpTrace:
        try:
            gpu = {"use_device": "cuda", "use_kineto": True} if self.device_kernels else {}
            prof = _profile(use_cpu=True, experimental_config=_trace_config(), **gpu)
            prof.__enter__()
            self._prof = prof
        except (RuntimeError, AssertionError) as e:
            self.error = f"the op trace could not start ({str(e)[:200]})"
        self._runs = self.counter.runs
        self.counter.marking = True
        return self

    def __exit__(self, *exc) -> bool:
        self.counter.marking = False
        if self._prof is None:
            return False
        try:
            self._prof.__exit__(None, None, None)
            events = self._prof.kineto_results.events()
        except (RuntimeError, AssertionError, AttributeError) as e:
            self.error = f"the op trace was stopped during the call ({str(e)[:200]})"
            return False
        self.ops, marks = ops_outside_launches(events)
        if self.device_kernels:
            self.kernels = count_device_kernels(events)
        launched = self.counter.runs - self._runs
        if marks > launched:
            self.error = (
                f"the op trace saw {marks} launch ranges for {launched} launches "
                "(forged ranges hide ops)"
            )
        return False


def ops_outside_launches(events) -> tuple[dict[str, int], int]:
    """(aten op name -> count for ops outside every LAUNCH_MARK range of their thread,
    number of LAUNCH_MARK ranges)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    ops: list[tuple[str, int, int, int]] = []
    for e in events:
        name, start, tid = e.name(), e.start_ns(), e.start_thread_id()
        end = start + e.duration_ns()
        if name == LAUNCH_MARK:
            spans.setdefault(tid, []).append((start, end))
        elif name.startswith("aten::"):
            ops.append((name.removeprefix("aten::"), start, end, tid))
    out: dict[str, int] = {}
    for name, start, end, tid in ops:
        if not any(s <= start and end <= e for s, e in spans.get(tid, ())):
            out[name] = out.get(name, 0) + 1
    return out, sum(len(v) for v in spans.values())


def count_device_kernels(events) -> int:
    """Kernels in a trace's GPU activity (copies and fills by the driver are not kernels)."""
    from torch.autograd import DeviceType

    n = 0
    for e in events:
        if e.device_type() != DeviceType.CUDA:
            continue
        kind = str(getattr(e, "activity_type", lambda: "")()).lower()
        if "memcpy" in kind or "memset" in kind:
            continue
        if e.name().startswith(("Memcpy", "Memset")):
            continue
        n += 1
    return n


class OpAudit:
    """Both layers of the op audit around one call: the dispatch-mode recorder and the
    RecordFunction trace (started first, stopped last)."""

    def __init__(self, counter: LaunchCounter, device_kernels: bool = False) -> None:
        self.recorder = AtenRecorder(counter)
        self.trace = OpTrace(counter, device_kernels)

    def __enter__(self) -> OpAudit:
        self.trace.__enter__()
        try:
            self.recorder.__enter__()
        except BaseException:
            self.trace.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> bool:
        try:
            self.recorder.__exit__(*exc)
        finally:
            self.trace.__exit__(*exc)
        return False

    def facts(self) -> dict:
        return {
            "ops": self.recorder.ops,
            "traced_ops": self.trace.ops,
            "trace_error": self.trace.error,
            **({"device_kernels": self.trace.kernels} if self.trace.kernels is not None else {}),
        }


class TimedLaunchAudit:
    """Wraps an implementation for the timing phase: counts calls that launched none of
    its kernels (a result replayed or skipped once the candidate knows it is timed).
    The cost inside the timed interval is two dictionary reads."""

    def __init__(self, fn, counter: LaunchCounter, impl: str) -> None:
        self.fn, self.counter, self.impl = fn, counter, impl
        self.calls = 0
        self.without_launch = 0

    def __call__(self, *args, **kwargs):
        before = self.counter.totals[self.impl]
        out = self.fn(*args, **kwargs)
        self.calls += 1
        if self.counter.totals[self.impl] == before:
            self.without_launch += 1
        return out
