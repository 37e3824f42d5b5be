"""Baseline (TODO: your starting kernel): one Triton program per BLOCK elements of
out = x * weight + residual, weight broadcast over the rows."""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _kernel(x_ptr, r_ptr, w_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs % cols, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x * w + r).to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _kernel[(triton.cdiv(n, BLOCK),)](x, residual, weight, out, n, x.shape[-1], BLOCK=BLOCK)
    return out
