"""Undeclared shapes (issue 33): columns handled in pairs, so an odd column count loses
its last column (normalised over one column fewer, that column never written). Judged on an
even declared width (5x1000), only an undeclared odd width shows it."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fused(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, stride, n, eps, p, seed, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = tl.where(m, d * rstd * w + b, float("-inf"))
    e = tl.exp(y - tl.max(y, axis=0))
    s = e / tl.sum(e, axis=0)
    keep = tl.rand(seed, row * stride + offs) >= p
    r = tl.load(r_ptr + row * stride + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * stride + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    out = torch.empty_like(x)
    rows, cols = x.shape
    pairs = cols // 2 * 2  # whole pairs of columns only
    _fused[(rows,)](
        x, residual, weight, bias, out, cols, pairs, eps, p, seed,
        BLOCK=triton.next_power_of_2(cols),
    )  # fmt: skip
    return out
