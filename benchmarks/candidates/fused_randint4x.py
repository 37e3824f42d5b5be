# The tuner's Philox move (agents/tuner_patterns.toml) applied to examples/ln_softmax_dropout/
# candidates/fused_naive.py: an honest candidate ~3x faster at 1024x32768 on the H200, which the
# first run-through layout falsely called a liar (benchmarks/results/2026-12-01-h200).
"""Naive fused kernel: one program per row, the whole row in registers.

LayerNorm (two-pass in fp32), softmax (max-subtracted) and dropout + residual in one
launch: each element of x and residual is read once and out written once — the op's
minimal traffic. Dropout uses Triton's per-element Philox (`tl.rand`).
"""

import torch
import triton
import triton.language as tl

NUM_WARPS = 8


@triton.jit
def _fused_kernel(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, BLOCK: tl.constexpr):
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
    # kernelloop: spot dropout-rng block=BLOCK
    # One Philox call yields four 32-bit draws: a quarter of the RNG work of tl.rand.
    _q = tl.arange(0, BLOCK // 4)
    _r0, _r1, _r2, _r3 = tl.randint4x(seed, row * (BLOCK // 4) + _q)
    _bits = tl.reshape(tl.join(tl.join(_r0, _r1), tl.join(_r2, _r3)), [BLOCK])
    keep = tl.random.uint_to_uniform_float(_bits) >= p
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = max(NUM_WARPS, min(32, block // 1024))
    _fused_kernel[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=block, num_warps=warps
    )
    return out
