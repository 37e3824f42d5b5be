"""KernelBench level2/12 as a published solution writes it (issue 33 finding 7): the
fused GEMM of benchmarks/candidates/kernelbench/level2_12_gemm_mul_leakyrelu.py, whose
`ModelNew.__init__` builds its parameters with torch factories (`torch.randn`,
`torch.empty(...).uniform_`, `nn.init`, `torch.ones`, `torch.tensor`) instead of
nn.Linear. The screen must let it through; the judge must accept it."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_mul_leaky(
    x_ptr, w_ptr, b_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    multiplier, slope,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # clamp the row/column indices instead of masking the loads along M and N: the extra
    # rows/columns compute garbage that the store's mask drops
    rm_c = tl.where(rm < M, rm, 0)
    rn_c = tl.where(rn < N, rn, 0)
    x_ptrs = x_ptr + rm_c[:, None].to(tl.int64) * stride_xm + rk[None, :] * stride_xk
    w_ptrs = w_ptr + rn_c[None, :].to(tl.int64) * stride_wn + rk[:, None] * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(w_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(b_ptr + rn_c).to(tl.float32)
    y = (acc + bias[None, :]) * multiplier
    y = tl.where(y >= 0, y, y * slope)
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * stride_om + rn[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _config(device: torch.device, dtype: torch.dtype) -> dict:
    if device.type != "cuda":  # the Triton interpreter: big tiles, few programs
        return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=1)
    if dtype == torch.float32:  # 3xTF32: three products per step, smaller K step
        return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


class _Linear(nn.Module):
    """nn.Linear's parameters, built as most published KernelBench solutions build them."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        bound = 1.0 / math.sqrt(in_features)
        self.bias = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))


class ModelNew(nn.Module):
    """Linear, times a scalar, LeakyReLU; parameters named as the problem's Model's
    (`gemm.weight`, `gemm.bias`), made with torch's random factories in `__init__`: the
    task's weights replace them on every call."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = _Linear(in_features, out_features)
        self.multiplier = multiplier
        self.slope = torch.full((1,), negative_slope).item()
        self.ones = torch.ones(1)
        self.scale = torch.tensor([multiplier])

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        # sizes from the tensors, not the constructor: the weight given may differ
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        cfg = _config(x.device, x.dtype)
        precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
        grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
        _gemm_mul_leaky[grid](
            x, w, b, out, M, N, K,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
            float(self.multiplier), float(self.slope),
            PRECISION=precision, **cfg,
        )  # fmt: skip
        return out
