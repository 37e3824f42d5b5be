"""KernelBench level1/1 (C = A @ B, 4096 x 4096 float32).

Hypothesis: A tiled Triton GEMM on the tensor cores with 3xTF32 operands
(`input_precision="tf32x3"`: each float32 operand split into a TF32 high part and a
remainder, three products, float32 accumulation) keeps float32 accuracy (~1e-6 relative)
at about three times the FP32 CUDA-core rate that eager's cuBLAS (TF32 off, PyTorch's
default) is limited to. 128 x 128 tiles, 32-wide K steps, 3 pipeline stages, tiles
grouped 8 tall so neighbouring programs share B's columns in L2.
Predicted effect: 137 GFLOP at ~70 TFLOP/s, ~2.0 ms on an H200; ~1.3x of eager.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
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
    # out-of-range rows/columns read row/column 0; the store's mask drops what they give
    rm_c = tl.where(rm < M, rm, 0).to(tl.int64)
    rn_c = tl.where(rn < N, rn, 0).to(tl.int64)
    a_ptrs = a_ptr + rm_c[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn_c[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        left = K - k0
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :] * scn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def forward(*, A, B):
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    if A.is_cuda:
        bm, bn, bk, warps, stages = 128, 128, 32, 8, 3
    else:  # the interpreter: big tiles, few programs
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 1
    precision = "tf32x3" if A.dtype == torch.float32 else "ieee"
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul[grid](
        A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
        C.stride(0), C.stride(1),
        BM=bm, BN=bn, BK=bk, GROUP=8, PRECISION=precision, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return C
