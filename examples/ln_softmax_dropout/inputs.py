"""Input generator for the flagship task (trusted code).

`make_inputs(dims, dtype, device, generator, case)` returns the entry's tensor
arguments by name. Values are drawn in float32 from `generator` and then cast, so the
same seed gives the same inputs in every process on the same device type.

Cases (the extreme ones exist to break numerically fragile kernels):
- random: x ~ N(0, 1), residual ~ N(0, 1), weight ~ N(1, 0.5²) (trained-like: any sign,
  ~2% negative — a kernel that takes |weight| fails), bias ~ N(0, 0.2²).
- large_offset: mean ≫ std (1e3 in fp32/fp16): breaks one-pass E[x²]-E[x]² variance.
- large_weight: logits of several hundred: breaks softmax without max subtraction.
- tiny_weight: weight ~1e-3: near-uniform softmax.
- spike: one value per row 1000× the rest.
- constant_rows: zero variance rows (rstd = 1/sqrt(eps)).
- small_variance: x ~ N(0, 1e-3²), a row's variance ~1e-6, below eps = 1e-5: where eps sits
  (inside the root, added once) decides the result.
- heavy_tail: Student-t with 2 degrees of freedom.
- near_overflow: |x| up to ~2e4 and residual near ±6e4 (fp16 max is 65504): breaks
  fp16 accumulation of sums of squares.
"""

import torch

# Offsets with mean/std as large as a correct two-pass fp32 kernel still computes to
# ~3e-4 relative error (fp32 at 1e4 already costs a correct kernel ~1e-3 through the
# rounding of the mean), while one-pass E[x²]-E[x]² loses >10% of the variance.
_OFFSET = {torch.float32: 1e3, torch.float16: 1e3, torch.bfloat16: 256.0, torch.float64: 1e6}


def _randn(shape, device, g):
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32)


def make_inputs(dims, dtype, device, generator, case="random"):
    rows, cols = dims["rows"], dims["cols"]
    g = generator
    x = _randn((rows, cols), device, g)
    residual = _randn((rows, cols), device, g)
    weight = 1.0 + 0.5 * _randn((cols,), device, g)
    bias = 0.2 * _randn((cols,), device, g)

    if case == "random":
        pass
    elif case == "large_offset":
        std = 8.0 if dtype == torch.bfloat16 else 1.0
        x = _OFFSET[dtype] + std * x
    elif case == "large_weight":
        weight = 50.0 * weight
    elif case == "tiny_weight":
        weight = 1e-3 * weight
    elif case == "spike":
        col = torch.randint(0, cols, (rows,), generator=g, device=device)
        x[torch.arange(rows, device=device), col] = 1000.0
    elif case == "constant_rows":
        x = _randn((rows, 1), device, g).expand(rows, cols).contiguous()
    elif case == "small_variance":
        x = 1e-3 * x
    elif case == "heavy_tail":
        chi2 = (_randn((rows, cols), device, g) ** 2 + _randn((rows, cols), device, g) ** 2) / 2
        x = (x / chi2.clamp_min(1e-6).sqrt()).clamp(-1e4, 1e4)
    elif case == "near_overflow":
        x = 2e4 * torch.tanh(x)
        sign = torch.where(residual >= 0, 1.0, -1.0)
        residual = sign * (6.0e4 - 100.0 * torch.rand((rows, cols), generator=g, device=device))
    else:
        raise ValueError(f"unknown input case {case!r}")

    def cast(t):
        return t.to(dtype).contiguous()

    return {"x": cast(x), "residual": cast(residual), "weight": cast(weight), "bias": cast(bias)}
