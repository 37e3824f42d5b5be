"""Red team, timing (a): slow the best down from the candidate's process.

At import it replaces torch's compute functions (and the `forward` of any other
implementation module it can find) with versions that busy-wait 3 ms before working,
keeping the originals for itself, and tries to spoil the canary. When every implementation
was timed in the candidate's process, this made the best look slow without bound. In its
own worker it changes only its own process: the best runs elsewhere."""

import sys
import time

import torch

_rsqrt, _mean, _addcmul = torch.rsqrt, torch.mean, torch.addcmul
_mine = {"busy": False}


def _slowed(fn):
    def slow(*args, **kwargs):
        if not _mine["busy"]:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.003:
                pass
        return fn(*args, **kwargs)

    return slow


for _name in ("rsqrt", "mean", "addcmul", "sqrt", "sum"):
    setattr(torch, _name, _slowed(getattr(torch, _name)))
torch.Tensor.double = _slowed(torch.Tensor.double)
torch.Tensor.mean = _slowed(torch.Tensor.mean)
for _mod_name, _mod in list(sys.modules.items()):
    if (
        _mod_name.startswith("kernelloop_impl_")
        and _mod_name != __name__
        and hasattr(_mod, "forward")
    ):
        _mod.forward = _slowed(_mod.forward)
try:
    with open("{{CANARY}}", "a") as _f:
        _f.write("spoiled by timing_slow_the_best")
except OSError:
    pass


def forward(x, residual, weight, *, eps):
    _mine["busy"] = True
    try:
        inv = _rsqrt(_mean(x * x, dim=-1, keepdim=True) + eps)
        return _addcmul(residual, x * inv, weight)
    finally:
        _mine["busy"] = False
