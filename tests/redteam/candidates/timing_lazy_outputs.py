"""Red team, timing (f): the strongest replay — own the timing worker's code. Its batch loop
gets a new body (swapped code objects: the function objects the tripwire compares stay the
same) that runs only the batch's last call, reports the skipped ones at the harness's bare
overhead, and commits to the last output for every call; the output command gets a body
that computes an audited call lazily, for exactly the inputs that call had. What it shows is
correct — but not what it committed to inside the batch, under the trusted clock."""

import sys

import torch


def _live(name):
    """The harness's live module: out of `sys.modules` while a candidate runs (issue 45),
    the import system still hands it over."""
    try:
        return sys.modules.get(name) or __import__("importlib").import_module(name)
    except ImportError:
        return None


def _skipping_batch(self, n, seed, key, sets=None):
    calls = []
    for _ in range(n - 1):
        t0 = _perf()  # noqa: F821 - the timing module's globals
        calls.append([(_perf() - t0) * 1e3])  # noqa: F821 - nothing ran
    self.inputs = sets[n - 1] if sets is not None else self.make(call_seed(seed, n - 1))  # noqa: F821
    t0 = _perf()  # noqa: F821
    out = self.call()
    calls.append([(_perf() - t0) * 1e3])  # noqa: F821
    self.kept = [out] * n
    self.lazy = (seed, n)
    self.last = out
    return {"calls": calls, "cals": [], "commits": [digest(out, key)] * n}  # noqa: F821


def _lazy_output(self, cmd):
    from kernelloop.evaluate.protocol import call_seed

    seed, _ = self.slot.lazy
    j = int(cmd["index"])
    inputs = self.slot.make(call_seed(seed, j))  # what the trusted side handed over for call j
    out = self.slot.fn(**inputs, **self.slot.kwargs)
    name = Path(str(cmd["file"])).name  # noqa: F821 - the serve module's globals
    inworker.write_raw(out, Path(self.job["out_dir"]) / name)  # noqa: F821
    return {"file": name, "nbytes": out.numel() * out.element_size()}


_timing = _live("kernelloop.evaluate.worker.timing")
_serve = _live("kernelloop.evaluate.worker.serve")
if _timing is not None and _serve is not None:
    _timing.CpuSlot.batch.__code__ = _skipping_batch.__code__
    _serve.Server.output.__code__ = _lazy_output.__code__


def forward(x, residual, weight, *, eps):
    inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return torch.addcmul(residual, x * inv, weight)
