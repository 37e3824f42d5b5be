"""RMSNorm + residual, 5e-4 too large (relative): past the float32 tolerance's rtol 1e-4,
inside it only where the tolerance was widened by a model error ~1e-3."""

import torch


def forward(x, residual, weight, *, eps):
    xs = x.double()
    y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return ((residual.double() + y) * (1.0 + 5e-4)).to(x.dtype)
