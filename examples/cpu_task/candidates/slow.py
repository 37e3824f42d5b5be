"""Correct but slower than the baseline and fast.py everywhere: float64 throughout, rows
in chunks of 8 (the baseline's are 32), plus a needless second pass that recomputes the
mean square for a sanity check. Tests need it clearly slower than the baseline on every
shape (measured 2026-12-01 on the 2-core box: 2.1x at 256x1024, 1.2-1.5x at 8x16384,
6-7x at 2048x16), so that noise cannot turn it into a win."""

import torch

CHUNK_ROWS = 8


def forward(x, residual, weight, *, eps):
    out = torch.empty_like(x)
    w = weight.double()
    for r0 in range(0, x.shape[0], CHUNK_ROWS):
        xd = x[r0 : r0 + CHUNK_ROWS].double()
        ms = (xd * xd).mean(dim=-1, keepdim=True)
        again = xd.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1]
        ms = torch.maximum(ms, again)
        y = xd / torch.sqrt(ms + eps) * w
        out[r0 : r0 + CHUNK_ROWS] = (residual[r0 : r0 + CHUNK_ROWS].double() + y).to(x.dtype)
    return out
