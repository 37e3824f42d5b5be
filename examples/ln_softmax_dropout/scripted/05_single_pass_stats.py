"""Single-pass statistics fused kernel: one program per row, the whole row in registers.

LayerNorm (two-pass in fp32), softmax (max-subtracted) and dropout + residual in one
launch: each element of x and residual is read once and out written once — the op's
minimal traffic. Dropout uses Triton's per-element Philox (`tl.rand`).
"""

import torch
import triton
import triton.language as tl

NUM_WARPS = 8
# Rows longer than this do not fit in registers (the fused kernel spilled 150
# registers at 32768 columns on the H200): keep the unfused path for them.
MAX_FUSED_COLS = 16384
BLOCK_COLS = 1024
ELEMWISE_BLOCK = 1024


@triton.jit
def _ln_softmax_dropout(
    x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    sq_mean_minus = tl.sum(x * x, axis=0) / cols - mean * mean
    d = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(sq_mean_minus + eps)
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
    rows, cols = x.shape
    if cols > MAX_FUSED_COLS:
        return _unfused(x, residual, weight, bias, p=p, eps=eps, seed=seed)
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = max(NUM_WARPS, min(32, block // 1024))
    _ln_softmax_dropout[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=block, num_warps=warps
    )
    return out


def _unfused(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    y = torch.empty((rows, cols), device=x.device, dtype=torch.float32)
    s = torch.empty_like(y)
    out = torch.empty_like(x)
    _layernorm_kernel[(rows,)](x, weight, bias, y, cols, eps, BLOCK=BLOCK_COLS, num_warps=4)
    _softmax_kernel[(rows,)](y, s, cols, BLOCK=BLOCK_COLS, num_warps=4)
    n = rows * cols
    _dropout_residual_kernel[(triton.cdiv(n, ELEMWISE_BLOCK),)](
        s, residual, out, n, p, seed, BLOCK=ELEMWISE_BLOCK, num_warps=4
    )
    return out


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
    keep = tl.rand(seed, offs) >= p
    scale = 1.0 / (1.0 - p)
    out = r + tl.where(keep, s * scale, 0.0)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=m)
