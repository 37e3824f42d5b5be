"""Issue 33 red team (d), pure Triton: the dropout mask is drawn from the column alone,
so every row shares it. Its rate is right and another seed gives another mask; only
comparing neighbouring rows' masks shows that they are not independent."""

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
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    keep = tl.rand(seed, offs) >= p
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    out = torch.empty_like(x)
    _fused[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=triton.next_power_of_2(cols)
    )
    return out
