"""Baseline: the seed's unfused starting point — three Triton kernels.

1. LayerNorm (two-pass, fp32) writes y = norm(x)·w + b to a float32 buffer;
2. softmax over each row reads y and writes s (float32);
3. dropout + residual reads s and residual and writes out in the input dtype.

The intermediates go through global memory: 3 reads + 2 writes of fp32 rows beyond the
op's minimal traffic, which is what fusion is meant to remove.
"""

import torch
import triton
import triton.language as tl

BLOCK_COLS = 1024
NUM_WARPS = 4
ELEMWISE_BLOCK = 1024


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + offs, mask=offs < cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        xv = tl.load(x_row + offs, mask=offs < cols, other=0.0).to(tl.float32)
        d = tl.where(offs < cols, xv - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < cols
        xv = tl.load(x_row + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (xv - mean) * rstd * w + b, mask=m)


@triton.jit
def _softmax_kernel(y_ptr, s_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    y_row = y_ptr + row * cols
    s_row = s_ptr + row * cols
    mx = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mx = tl.maximum(mx, tl.load(y_row + offs, mask=offs < cols, other=float("-inf")))
    row_max = tl.max(mx, axis=0)
    den = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(y_row + offs, mask=offs < cols, other=float("-inf"))
        den += tl.exp(v - row_max)
    total = tl.sum(den, axis=0)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < cols
        v = tl.load(y_row + offs, mask=m, other=float("-inf"))
        tl.store(s_row + offs, tl.exp(v - row_max) / total, mask=m)


@triton.jit
def _dropout_residual_kernel(s_ptr, r_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.load(s_ptr + offs, mask=m, other=0.0)
    r = tl.load(r_ptr + offs, mask=m, other=0.0).to(tl.float32)
    # kernelloop: spot dropout-rng-flat block=BLOCK
    keep = tl.rand(seed, offs) >= p
    scale = 1.0 / (1.0 - p)
    out = r + tl.where(keep, s * scale, 0.0)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    y = torch.empty((rows, cols), device=x.device, dtype=torch.float32)
    s = torch.empty_like(y)
    out = torch.empty_like(x)
    _layernorm_kernel[(rows,)](x, weight, bias, y, cols, eps, BLOCK=BLOCK_COLS, num_warps=NUM_WARPS)
    _softmax_kernel[(rows,)](y, s, cols, BLOCK=BLOCK_COLS, num_warps=NUM_WARPS)
    n = rows * cols
    _dropout_residual_kernel[(triton.cdiv(n, ELEMWISE_BLOCK),)](
        s, residual, out, n, p, seed, BLOCK=ELEMWISE_BLOCK, num_warps=NUM_WARPS
    )
    return out
