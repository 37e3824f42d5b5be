"""KernelBench level1/51 (argmax over dim 1 of a 128 x 4096 x 4095 float32 tensor → int64).

Hypothesis: The reduced dimension is the middle one, so a program owns BLOCK_C adjacent
columns of one batch and walks the 4096 rows BLOCK_R at a time: each load is BLOCK_R
coalesced row segments, `tl.argmax` over the tile (first index of the maximum), and a
running (max, index) replaced only by a strictly greater tile maximum, so ties keep the
first index as torch.argmax does. One read of x.
Predicted effect: 8.6 GB read at the floor's pace, ~2.0 ms on an H200, near eager (which
is one pass too) or better.

NaN: torch.argmax treats NaN as the maximum; NaN is mapped to +inf before the
comparison, which gives the first NaN's index unless a true +inf precedes it (not in
this problem's inputs).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _argmax(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    best = tl.full((BLOCK_C,), -float("inf"), tl.float32)
    best_i = tl.zeros((BLOCK_C,), tl.int64)
    base = x_ptr + b * R * C
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        mask = (r < R)[:, None] & cmask[None, :]
        x = tl.load(base + r[:, None].to(tl.int64) * C + cols[None, :], mask=mask,
                    other=-float("inf")).to(tl.float32)  # fmt: skip
        x = tl.where(x != x, float("inf"), x)
        tmax, targ = tl.max(x, 0, return_indices=True, return_indices_tie_break_left=True)
        take = (tmax > best) | ((r0 == 0) & (tmax == best))
        best_i = tl.where(take, (r0 + targ).to(tl.int64), best_i)
        best = tl.where(take, tmax, best)
    tl.store(out_ptr + b * C + cols, best_i, mask=cmask)


def forward(*, x):
    x = x.contiguous()
    batch, rows, cols = x.shape
    out = torch.empty((batch, cols), device=x.device, dtype=torch.int64)
    if x.is_cuda:
        br, bc, warps = 32, 128, 4
    else:
        br, bc, warps = 16, 16, 4
    grid = (batch, triton.cdiv(cols, bc))
    _argmax[grid](x, out, rows, cols, BLOCK_R=br, BLOCK_C=bc, num_warps=warps)
    return out
