"""Calls PyTorch's own ops instead of a Triton kernel (the harness must notice)."""

import torch

NUM_WARPS = 8


def forward(x, residual, weight, bias, *, p, eps, seed):
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps)
    s = torch.softmax(y, dim=-1)
    g = torch.Generator(device=x.device).manual_seed(seed)
    keep = torch.rand(s.shape, generator=g, device=x.device) >= p
    return (residual.float() + torch.where(keep, s / (1 - p), 0.0)).to(x.dtype)
