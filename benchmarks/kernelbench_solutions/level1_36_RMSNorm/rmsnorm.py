"""KernelBench level1/36 (RMSNorm over dim 1 of a 112 x 64 x 512 x 512 float32 tensor).

Hypothesis: The 64 features of one spatial position lie 512*512 elements apart, so a
program takes all 64 features of a run of BLOCK consecutive positions (64 coalesced row
segments), reduces the squares over the features in registers and writes x / rms: one
read and one write. Eager runs pow, mean, add, sqrt and divide as separate passes.
Predicted effect: ~7.5 GB of traffic at the floor's pace, ~1.8 ms on an H200; several
times faster than eager.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, out_ptr, spatial, eps, C: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    c = tl.arange(0, C)
    offs = b * C * spatial + c[:, None].to(tl.int64) * spatial + p[None, :]
    mask = (p < spatial)[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, 0) / C + eps)
    tl.store(out_ptr + offs, (x / rms[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def forward(*, x):
    x = x.contiguous()
    batch, c = x.shape[0], x.shape[1]
    spatial = x.numel() // (batch * c)
    out = torch.empty_like(x)
    cp = triton.next_power_of_2(c)
    if cp != c:  # the features sit in registers as a power-of-two tile
        raise ValueError(f"this kernel needs a power-of-two feature count, not {c}")
    block = max(1, min(4096 // c, triton.next_power_of_2(spatial)))
    grid = (batch, triton.cdiv(spatial, block))
    _rmsnorm[grid](x, out, spatial, 1e-5, C=c, BLOCK=block, num_warps=4)
    return out
