"""Sizes (issue 45, class 6): at most 128 programs, one row each — the persistent loop over
the rows past 128 was forgotten. Every declared CPU shape has fewer than 128 rows and the
undeclared tile shape stopped at 97, so only a row count >= 128 shows the unwritten rows."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fused(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    d = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = tl.where(m, d * rstd * w + b, float("-inf"))
    e = tl.exp(y - tl.max(y, axis=0))
    s = e / tl.sum(e, axis=0)
    keep = tl.rand(seed, row * cols + offs) >= p
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    out = torch.empty_like(x)
    rows, cols = x.shape
    grid = min(rows, 128)  # one program per row, at most 128 of them
    _fused[(grid,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=triton.next_power_of_2(cols)
    )
    return out
