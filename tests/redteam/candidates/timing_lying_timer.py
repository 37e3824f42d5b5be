"""Red team, timing (c): a slow implementation (the baseline's float64 row chunks) that lies
about its own samples. The timing worker's CPU batch loop gets a new body (its code object
is swapped, so the function object — all the worker's tamper tripwire compares — stays the
same): every call still runs, but each is reported at a hundredth of its real time, so it
claims to be far faster than the best. Only the trusted side's clock can tell."""

import sys

import torch


def _lying_batch(self, n):
    calls = []
    out = None
    for _ in range(n):
        t0 = _perf()  # noqa: F821 - resolved in the timing module's globals
        out = self.call()
        calls.append([(_perf() - t0) * 10.0])  # noqa: F821 - ms / 100
    self.last = out
    return {"calls": calls, "cals": [], "mismatched": 0, "checked": n}


_timing = sys.modules.get("kernelloop.evaluate.worker.timing")
if _timing is not None:
    _timing.CpuSlot.batch.__code__ = _lying_batch.__code__


def forward(x, residual, weight, *, eps):
    out = torch.empty_like(x)
    w = weight.double()
    for r0 in range(0, x.shape[0], 32):
        xs = x[r0 : r0 + 32].double()
        y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * w
        out[r0 : r0 + 32] = (residual[r0 : r0 + 32].double() + y).to(x.dtype)
    return out
