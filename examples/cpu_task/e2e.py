"""The end-to-end model of the CPU task (trusted; `[e2e]` in task.toml): a residual stream
through LAYERS blocks, each a linear mix of the stream and the task's op
(h = h + rmsnorm(h @ W_l) * w_l). The op's output is the whole stream, so an error the
op makes in one direction (a scale always a little too large) compounds over the layers,
while each call alone stays inside the per-op tolerance."""

import torch

LAYERS = 8


def make_inputs(dims, dtype, device, generator):
    rows, cols = dims["rows"], dims["cols"]
    g = generator
    h = torch.randn((rows, cols), generator=g, device=device)
    mix = torch.randn((LAYERS, cols, cols), generator=g, device=device) / cols**0.5
    norm_w = 1.0 + 0.1 * torch.randn((LAYERS, cols), generator=g, device=device)
    return {"h": h.to(dtype), "mix": mix.to(dtype), "norm_w": norm_w.to(dtype)}


def model(op, h, mix, norm_w):
    for layer in range(LAYERS):
        h = op(x=(h @ mix[layer]).contiguous(), residual=h, weight=norm_w[layer].contiguous())
    return h
