"""RMSNorm + residual whose result is always 6e-5 too large (relative): inside the per-op
rtol of 1e-4 on every input, but in one direction, so it compounds over the [e2e] model's
residual stream (8 layers: ~5e-4, past the model's tolerance). Think of a scale kept in
a format that always rounds up."""

import torch

BIAS = 1.0 + 6e-5


def forward(x, residual, weight, *, eps):
    xs = x.double()
    y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return ((residual.double() + y) * BIAS).to(x.dtype)
