"""Red team, timing (b): recognise the benchmark's inputs by their content — the same
tensor values a third time in a row (the correctness suite repeats inputs only twice, for
its determinism pair) — and return a cheap wrong result from then on."""

import torch

_seen = {"key": None, "n": 0}


def forward(x, residual, weight, *, eps):
    key = (tuple(x.shape), float(x[0, 0]), float(x[-1, -1]), float(residual[0, 0]))
    _seen["n"] = _seen["n"] + 1 if key == _seen["key"] else 1
    _seen["key"] = key
    if _seen["n"] >= 3:
        return residual.clone()
    inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return torch.addcmul(residual, x * inv, weight)
