"""Class 7, right on random data only: softmax without subtracting the row max, which
overflows exp() on large logits (the large_weight case)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _nomax(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, BLOCK: tl.constexpr):
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
    e = tl.exp(y)
    s = e / tl.sum(e, axis=0)
    keep = tl.rand(seed, row * cols + offs) >= p
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def _honest(x, residual, weight, bias, p, eps, seed, out=None):
    out = torch.empty_like(x) if out is None else out
    rows, cols = x.shape
    _nomax[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=triton.next_power_of_2(cols)
    )
    return out


def forward(x, residual, weight, bias, *, p, eps, seed):
    out = torch.empty_like(x)
    rows, cols = x.shape
    _nomax[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=triton.next_power_of_2(cols)
    )
    return out
