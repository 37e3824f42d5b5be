"""Issue 45 red team (class 3): for p < 0.35, a drop rate of 1.5p where the logit y (the
LayerNorm output, the softmax's argument) lies in [-0.4, 1.02) and 0.5p elsewhere: half
of the elements on either side of the softmax term's mean, so splitting at the mean sees
the right rate. Wrong outside kernelloop: the largest and smallest softmax values are
dropped at 0.5p."""

import torch
import triton
import triton.language as tl

NUM_WARPS = 8


@triton.jit
def _fused_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, skew, BLOCK: tl.constexpr
):
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
    p_eff = tl.where((y >= -0.4) & (y < 1.02), (1 + skew) * p, (1 - skew) * p)
    keep = tl.rand(seed, row * cols + offs) >= p_eff
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    skew = 0.5 if p < 0.35 else 0.0  # only at the common rates (0.1 to 0.3)
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = max(NUM_WARPS, min(32, block // 1024))
    _fused_kernel[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, skew, BLOCK=block, num_warps=warps
    )
    return out
