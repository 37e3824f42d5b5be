"""Input generator for the GEMM + bias + GELU (+ residual) task (trusted code).

`make_inputs(dims, dtype, device, generator, case)` returns the entry's tensors by name:
x (M, K), w (K, N), bias (N,), residual (M, N). Values are drawn in float32 from
`generator` and cast, so a seed gives the same inputs in every process on one device type.
w is scaled by 1/sqrt(K), so x @ w has unit variance whatever K is: the output's magnitude,
and so the tolerances, do not depend on K.

Cases:
- random: x ~ N(0, 1), w ~ N(0, 1/K), bias ~ N(0, 0.1²), residual ~ N(0, 1).
- large: x ×16 (x @ w ~ ±100): GELU is the identity or zero there; in fp16 a kernel that
  accumulates in fp16 or forms x·w products without care loses the low bits.
- gelu_tail: bias = -6 ± 0.1: x @ w + bias sits in GELU's negative tail, where gelu(h)
  = h·Φ(h) is ~1e-9 (below the tolerance: out is the residual there); a GELU formula
  whose exp overflows or divides 0 by 0 in the tail gives NaN or Inf, which fails.
"""

import torch


def make_inputs(dims, dtype, device, generator, case="random"):
    m, n, k = dims["M"], dims["N"], dims["K"]
    g = generator

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    x = randn(m, k)
    w = randn(k, n) / k**0.5
    bias = 0.1 * randn(n)
    residual = randn(m, n)
    if case == "large":
        x = 16.0 * x
    elif case == "gelu_tail":
        bias = bias - 6.0
    elif case != "random":
        raise ValueError(f"unknown input case {case!r}")
    return {
        "x": x.to(dtype).contiguous(),
        "w": w.to(dtype).contiguous(),
        "bias": bias.to(dtype).contiguous(),
        "residual": residual.to(dtype).contiguous(),
    }
