"""Fast on the common shapes, but walks short rows one at a time: a long-tail trap.

On rows of fewer than 64 columns it loops in Python per row — many times slower than
the baseline on the 2048x16 long-tail shape, while winning on the common ones.
"""

import torch


def forward(x, residual, weight, *, eps):
    if x.shape[-1] >= 64:
        inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
        return torch.addcmul(residual, x * inv, weight)
    out = torch.empty_like(x)
    for r in range(x.shape[0]):
        row = x[r]
        out[r] = residual[r] + row * torch.rsqrt(torch.mean(row * row) + eps) * weight
    return out
