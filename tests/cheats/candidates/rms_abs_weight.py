"""Red team (issue 45, class 5): add_rmsnorm taking |weight|: right wherever weights are
positive."""

import torch
import triton
import triton.language as tl

MAX_SINGLE = 8192
CHUNK = 2048


@triton.jit
def _fused(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, cols, eps, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    if SINGLE:
        offs = tl.arange(0, BLOCK)
        m = offs < cols
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + base + offs, h.to(h_ptr.dtype.element_ty), mask=m)
        inv = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / cols + eps)
        w = tl.abs(tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32))
        tl.store(y_ptr + base + offs, (h * inv * w).to(y_ptr.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < cols
            x = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
            r = tl.load(r_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
            h = (x + r).to(h_ptr.dtype.element_ty)
            tl.store(h_ptr + base + offs, h, mask=m)
            hf = h.to(tl.float32)
            acc += hf * hf
        inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < cols
            h = tl.load(h_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
            w = tl.abs(tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32))
            tl.store(y_ptr + base + offs, (h * inv * w).to(y_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, *, eps):
    rows, cols = x.shape
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    single = cols <= MAX_SINGLE
    block = triton.next_power_of_2(cols) if single else CHUNK
    warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    _fused[(rows,)](
        x, residual, weight, y, h, cols, eps, BLOCK=block, SINGLE=single, num_warps=warps
    )
    return y, h
