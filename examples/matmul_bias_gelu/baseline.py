"""Baseline: a correct but naive Triton GEMM with the bias + GELU + residual epilogue.

Small 32x32 output tiles, a 32-wide K step, no software pipelining (one stage) and no
tile grouping:
every tile re-reads its rows of x and columns of w from DRAM/L2, and the tensor cores sit
idle most of the time. Accumulates in fp32 and rounds once, at the store.

On the CPU (Triton's interpreter) the tiles are upcast to fp32 before `tl.dot`: the
interpreter multiplies bf16 tiles as raw bits (results ~1e11 off, triton 3.6). The upcast
is exact (bf16 and fp16 values are fp32 values), so the CPU result is the GPU's to within
fp32 accumulation order.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32
NUM_WARPS = 4
NUM_STAGES = 1

_SQRT_HALF = tl.constexpr(0.7071067811865476)  # a Triton kernel reads only constexpr globals


@triton.jit
def _gemm_bias_gelu_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)).to(tl.int64)
    rn = (tl.program_id(1) * BN + tl.arange(0, BN)).to(tl.int64)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(
            x_ptr + rm[:, None] * K + kk[None, :],
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            w_ptr + kk[:, None] * N + rn[None, :],
            mask=(kk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    nmask = rn < N
    h = acc + tl.load(b_ptr + rn, mask=nmask, other=0.0).to(tl.float32)[None, :]
    gelu = 0.5 * h * (1.0 + tl.math.erf(h * _SQRT_HALF))
    omask = (rm[:, None] < M) & nmask[None, :]
    offs = rm[:, None] * N + rn[None, :]
    r = tl.load(r_ptr + offs, mask=omask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (r + gelu).to(out_ptr.dtype.element_ty), mask=omask)


def forward(x, w, bias, residual):
    m, k = x.shape
    n = w.shape[1]
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _gemm_bias_gelu_kernel[grid](
        x, w, bias, residual, out, m, n, k,
        BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, UPCAST=not x.is_cuda,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )  # fmt: skip
    return out
