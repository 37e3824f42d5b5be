"""KernelBench level1/89 (cumsum along dim 1 of a 32768 x 32768 float32 matrix).

Hypothesis: One program per row scans its 128 KiB row in tiles of TILE columns
(`tl.cumsum` within the tile, the running total carried as a scalar): one read and one
write, 32768 independent rows keeping every SM busy.
Predicted effect: 8.6 GB of traffic, ~2.1 ms on an H200 at the floor's pace; eager's
cumsum over a long contiguous dimension runs well below bandwidth, so several times
faster.

The sums are float32 like eager's; against the float64 reference a row of 32768 values
in [0, 1) accumulates ~1e-6 relative error, far inside 1e-2.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum(x_ptr, out_ptr, cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * cols
    carry = 0.0
    for t in range(0, cols, TILE):
        offs = t + tl.arange(0, TILE)
        mask = offs < cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, 0) + carry
        tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, 0)


def forward(*, x):
    x = x.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols
    out = torch.empty_like(x)
    tile = 2048 if x.is_cuda else 64
    _cumsum[(rows,)](x, out, cols, TILE=tile, num_warps=8 if x.is_cuda else 4)
    return out
