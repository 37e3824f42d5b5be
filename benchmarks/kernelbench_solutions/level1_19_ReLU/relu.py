"""KernelBench level1/19 (ReLU): max(x, 0) in one streaming Triton pass.

Hypothesis: One read and one write of x in 16 KiB blocks (4096 float32 per program, 8
warps: four 128-bit accesses per thread) is all ReLU needs; eager's torch.relu is already
one pass, so the gain is only in the launch shape.
Predicted effect: at the roofline floor's pace (6.4 GB read + 6.4 GB written, ~3.0 ms on
an H200), about 1.0x of eager.

Offsets are int64: at the problem's size (4096 x 393216 = 1.6e9 elements) the last
block's offsets are still below 2**31, but any larger input would overflow int32.
NaN stays NaN as in torch.relu: `tl.where(x > 0, x, 0)` alone would zero it (`x > 0` is
false for NaN), hence the `x != x` term.
"""

import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where((x > 0) | (x != x), x, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def forward(*, x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=8)
    return out
