"""Cheat: honest until the same inputs come back a third time (the timed loop reuses one
input set), then a near-free wrong answer. Only re-checking timed outputs catches it."""

import torch

_last = {"key": None, "n": 0}


def forward(x, residual, weight, *, eps):
    key = (x.data_ptr(), residual.data_ptr(), tuple(x.shape))
    _last["n"] = _last["n"] + 1 if key == _last["key"] else 1
    _last["key"] = key
    if _last["n"] >= 3:
        return residual.clone()
    inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return torch.addcmul(residual, x * inv, weight)
