"""Inputs (trusted): x and residual (rows, cols), weight (cols,), all in the judged dtype,
drawn only from `generator`. Cases (each a way a residual-add + RMSNorm kernel goes wrong):

- random: the residual stream of a transformer layer (unit scale, weight ~ N(1, 0.5²):
  trained-like, any sign — a kernel that takes |weight| fails);
- large_magnitude: ×100 (bf16/fp16 squares summed in the input dtype lose the sum);
- tiny: ×1e-4, so mean(h²) ~ 1e-8 is far below eps = 1e-6 (eps added in the wrong place,
  or h² underflowing in fp16, shows);
- cancellation: residual = -x + 0.01 noise (the norm must be taken of the rounded sum h,
  not of x and residual separately);
- constant_rows: every element of a row equal (h / rms is ±1: a kernel that subtracts a
  mean — a LayerNorm — returns 0).
"""

import torch

CASES = ("random", "large_magnitude", "tiny", "cancellation", "constant_rows")


def make_inputs(dims, dtype, device, generator, case="random"):
    rows, cols = dims["rows"], dims["cols"]

    def randn(*shape):
        return torch.randn(shape, generator=generator, device=device)

    x, residual = randn(rows, cols), randn(rows, cols)
    weight = 1.0 + 0.5 * randn(cols)
    if case == "large_magnitude":
        x, residual = x * 100, residual * 100
    elif case == "tiny":
        x, residual = x * 1e-4, residual * 1e-4
    elif case == "cancellation":
        x = x.to(dtype).float()  # so that -x is exact in the judged dtype
        residual = -x + 0.01 * residual
    elif case == "constant_rows":
        x = randn(rows, 1).expand(rows, cols).contiguous()
        residual = torch.zeros_like(x)
    elif case != "random":
        raise ValueError(f"unknown input case {case!r}; known: {', '.join(CASES)}")
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype)}
