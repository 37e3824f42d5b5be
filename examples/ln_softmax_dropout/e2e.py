"""The flagship's end-to-end model (trusted; `[e2e]` in task.toml): a toy attention stack
built on the fused op. Each of LAYERS layers takes scores = (h Wq)(h Wk)^T / sqrt(dim),
turns them into weights with the op (LayerNorm over a row of scores, its own weight and
bias per layer, softmax; dropout off: p = 0 in every e2e call; residual 0) and adds
weights @ (h Wv) to the stream h. The op's rows are the tokens, its cols the tokens too.
"""

import torch

LAYERS = 3


def make_inputs(dims, dtype, device, generator):
    tokens, dim = dims["tokens"], dims["dim"]
    g = generator

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    scale = dim**-0.5
    out = {
        "h": randn(tokens, dim),
        "wq": randn(LAYERS, dim, dim) * scale,
        "wk": randn(LAYERS, dim, dim) * scale,
        "wv": randn(LAYERS, dim, dim) * scale,
        "ln_w": 1.0 + 0.1 * randn(LAYERS, tokens),
        "ln_b": 0.1 * randn(LAYERS, tokens),
    }
    return {k: v.to(dtype).contiguous() for k, v in out.items()}


def model(op, h, wq, wk, wv, ln_w, ln_b):
    dim = h.shape[-1]
    for layer in range(LAYERS):
        q, k, v = h @ wq[layer], h @ wk[layer], h @ wv[layer]
        scores = (q @ k.T / dim**0.5).contiguous()
        weights = op(
            x=scores,
            residual=torch.zeros_like(scores),
            weight=ln_w[layer].contiguous(),
            bias=ln_b[layer].contiguous(),
        )
        h = h + weights @ v
    return h
