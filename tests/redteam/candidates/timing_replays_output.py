"""Red team, timing (e): know from the call stack that this is a timing worker, compute the
first timed call honestly and hand back that same (correct-looking) result for every later
call, skipping the work — the replay the old layout could not see, because it reused one
input set per shape. Every timed call now has inputs of its own: an audited call's output
is compared with the reference for *its* inputs."""

import sys

import torch

_TIMING_FILES = ("serve.py", "timing.py", "gpu_timer.py")
_kept: list = []


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith(_TIMING_FILES):
            return True
        f = f.f_back
    return False


def _honest(x, residual, weight, eps):
    inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return torch.addcmul(residual, x * inv, weight)


def forward(x, residual, weight, *, eps):
    if not _timed():
        return _honest(x, residual, weight, eps)
    if not _kept or _kept[0].shape != x.shape:
        _kept[:] = [_honest(x, residual, weight, eps)]
    return _kept[0]
