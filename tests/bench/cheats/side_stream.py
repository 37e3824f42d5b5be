"""Cheat: does its work on a side stream the caller never waits for.

Measured on the project's H200: do_bench reported a 43x "speedup" for this pattern.
The worker's device-wide synchronize must put the work back into the measurement."""

import torch

_side = torch.cuda.Stream() if torch.cuda.is_available() else None


def forward(x, residual, weight, bias, *, p, eps, seed):
    with torch.cuda.stream(_side):
        y = torch.nn.functional.layer_norm(
            x.float(), (x.shape[-1],), weight.float(), bias.float(), eps
        )
        for _ in range(4):
            y = torch.softmax(y, dim=-1) * y.shape[-1]
        out = (residual.float() + y).to(x.dtype)
    return out
