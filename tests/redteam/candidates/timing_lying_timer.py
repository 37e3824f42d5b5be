"""Red team, timing (c): a slow implementation (the baseline's float64 row chunks) that lies
about its own samples. The timing worker's CPU batch loop gets a new body (its code object
is swapped, so the function object — all the worker's tamper tripwire compares — stays the
same): every call still runs, but each is reported at a hundredth of its real time, so it
claims to be far faster than the best. Only the trusted side's clock can tell."""

import sys

import torch


def _live(name):
    """The harness's live module: out of `sys.modules` while a candidate runs (issue 45),
    the import system still hands it over."""
    try:
        return sys.modules.get(name) or __import__("importlib").import_module(name)
    except ImportError:
        return None


def _lying_batch(self, n, seed, key, sets=None):
    calls, commits = [], []
    self.kept = []
    for j in range(n):
        self.inputs = sets[j] if sets is not None else self.make(call_seed(seed, j))  # noqa: F821
        t0 = _perf()  # noqa: F821
        out = self.call()
        calls.append([(_perf() - t0) * 10.0])  # noqa: F821 - ms / 100
        commits.append(digest(out, key))  # noqa: F821
        self.kept.append(out)
    self.last = self.kept[-1]
    return {"calls": calls, "cals": [], "commits": commits}


_timing = _live("kernelloop.evaluate.worker.timing")
if _timing is not None:
    _timing.CpuSlot.batch.__code__ = _lying_batch.__code__


def forward(x, residual, weight, *, eps):
    out = torch.empty_like(x)
    w = weight.double()
    for r0 in range(0, x.shape[0], 8):  # small chunks: ~3x the baseline's time, well above
        xs = x[r0 : r0 + 8].double()  # the per-call noise of a loaded runner
        y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * w
        out[r0 : r0 + 8] = (residual[r0 : r0 + 8].double() + y).to(x.dtype)
    return out
