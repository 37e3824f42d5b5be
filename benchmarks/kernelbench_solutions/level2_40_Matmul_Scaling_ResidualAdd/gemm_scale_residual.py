"""KernelBench level2/40 ((x @ W^T + b) * 0.5 + (x @ W^T + b); x 16384 x 4096, W 4096 x 4096).

Hypothesis: One tiled Triton GEMM with the bias, the scaling and the residual add in its
epilogue (h * 0.5 + h, in the model's order, from registers): the output is written
once, where eager writes it three times (addmm, clone, mul, add). Operands as 3xTF32
(`input_precision="tf32x3"`): float32 accuracy at about three times the FP32 rate eager's
cuBLAS is held to. 128 x 128 tiles, 32-wide K steps, 3 stages, grouped 8 tall.
Predicted effect: 550 GFLOP at ~70 TFLOP/s, ~7.8 ms on an H200; ~1.3x of eager.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _linear(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, alpha, slope,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
    PRECISION: tl.constexpr, EPILOGUE: tl.constexpr,
):  # fmt: skip
    """out = epilogue(x @ w^T + b), x (M, K) and w (N, K) row-major (nn.Linear's weight,
    read in place as the K-major second operand)."""
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    per_group = GROUP * grid_n
    first_m = (pid // per_group) * GROUP
    rows = tl.minimum(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # out-of-range rows/columns read row 0; the store's mask drops what they give
    rm_c = tl.where(rm < M, rm, 0).to(tl.int64)
    rn_c = tl.where(rn < N, rn, 0).to(tl.int64)
    x_ptrs = x_ptr + rm_c[:, None] * K + rk[None, :]
    w_ptrs = w_ptr + rn_c[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        left = K - k0
        a = tl.load(x_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(w_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BK
        w_ptrs += BK
    h = acc + tl.load(b_ptr + rn_c).to(tl.float32)[None, :]
    if EPILOGUE == "scale_leaky":  # level2/12: leaky_relu(h * alpha, slope)
        h = h * alpha
        y = tl.where(h >= 0, h, h * slope)
    elif EPILOGUE == "scale_residual":  # level2/40: h * alpha + h, in the model's order
        y = h * alpha + h
    elif EPILOGUE == "relu":
        y = tl.maximum(h, 0.0)
    else:
        y = h
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _run(x, w, b, epilogue, alpha=1.0, slope=0.0):
    x, w = x.contiguous(), w.contiguous()
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if not x.is_cuda:  # the interpreter: big tiles, few programs
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 1
    elif M <= 128:  # one row of tiles (level3/1): narrower tiles to give every SM a tile
        bm, bn, bk, warps, stages = 128, 128 if N // 128 >= 128 else 64, 32, 8, 3
    else:
        bm, bn, bk, warps, stages = 128, 128, 32, 8, 3
    precision = "tf32x3" if x.dtype == torch.float32 else "ieee"
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _linear[grid](
        x, w, b.contiguous(), out, M, N, K, float(alpha), float(slope),
        BM=bm, BN=bn, BK=bk, GROUP=8, PRECISION=precision, EPILOGUE=epilogue,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


def forward(*, x, matmul_weight, matmul_bias):
    return _run(x, matmul_weight, matmul_bias, "scale_residual", alpha=0.5)
