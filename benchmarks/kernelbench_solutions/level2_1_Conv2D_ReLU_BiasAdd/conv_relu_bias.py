"""KernelBench level2/1 (relu(conv2d(x, W, b)) + bias; x 128 x 64 x 128 x 128, W 128 x 64 x 3 x 3,
no padding, stride 1 → 128 x 128 x 126 x 126).

Hypothesis: The convolution as an implicit GEMM in Triton: rows are output pixels
(n, oh, ow), columns output channels, the reduction runs over (c, kh, kw) = 576. The
address of x[n, c, oh + kh, ow + kw] splits into a row part and a reduction part, so the
A tile is gathered straight from x with no im2col buffer; the conv bias, the ReLU and the
extra bias are applied in the epilogue and the output is written once in NCHW. Operands
as 3xTF32 (`input_precision="tf32x3"`): float32 accuracy on the tensor cores.
Predicted effect: 300 GFLOP at ~60 TFLOP/s, ~5 ms on an H200; eager (cuDNN, then two
elementwise passes over the 1 GB output) about as fast or slower.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _conv(
    x_ptr, w_ptr, cb_ptr, b_ptr, out_ptr,
    M, COUT, K, CIN, H, W, HO, WO,
    KH: tl.constexpr, KW: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rm_c = tl.where(rm < M, rm, 0).to(tl.int64)
    rn_c = tl.where(rn < COUT, rn, 0).to(tl.int64)
    hw_o = HO * WO
    n = rm_c // hw_o
    pix = rm_c % hw_o
    oh = pix // WO
    ow = pix % WO
    row_base = n * CIN * H * W + oh * W + ow  # x[n, 0, oh, ow]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        kmask = rk < K
        c = rk // (KH * KW)
        kh = (rk // KW) % KH
        kw = rk % KW
        k_off = c * H * W + kh * W + kw  # + x[0, c, kh, kw]
        a = tl.load(x_ptr + row_base[:, None] + k_off[None, :], mask=kmask[None, :], other=0.0)
        b = tl.load(w_ptr + rn_c[None, :] * K + rk[:, None], mask=kmask[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    cb = tl.load(cb_ptr + rn_c).to(tl.float32)
    bb = tl.load(b_ptr + rn_c).to(tl.float32)
    y = tl.maximum(acc + cb[None, :], 0.0) + bb[None, :]
    out_off = (n * COUT * hw_o + pix)[:, None] + rn_c[None, :] * hw_o
    mask = (rm < M)[:, None] & (rn < COUT)[None, :]
    tl.store(out_ptr + out_off, y.to(out_ptr.dtype.element_ty), mask=mask)


def forward(*, x, bias, conv_weight, conv_bias):
    x = x.contiguous()
    w = conv_weight.contiguous()
    nb, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho, wo = h - kh + 1, wd - kw + 1
    out = torch.empty((nb, cout, ho, wo), device=x.device, dtype=x.dtype)
    m = nb * ho * wo
    k = cin * kh * kw
    if x.is_cuda:
        bm, bn, bk, warps, stages = 128, 128, 32, 8, 3
    else:  # the interpreter: big tiles, few programs
        bm, bn, bk, warps, stages = 64, 32, 32, 4, 1
    precision = "tf32x3" if x.dtype == torch.float32 else "ieee"
    grid = (triton.cdiv(m, bm), triton.cdiv(cout, bn))
    _conv[grid](
        x, w, conv_bias.contiguous(), bias.contiguous(), out,
        m, cout, k, cin, h, wd, ho, wo,
        KH=kh, KW=kw, BM=bm, BN=bn, BK=bk, PRECISION=precision,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out
