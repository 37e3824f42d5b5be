"""Class 16 (GPU), sticky CUDA error: stores far out of bounds (an illegal address poisons
the CUDA context for the rest of the process)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill(src_ptr, out_ptr, n, value, FROM_SRC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    offs = offs + n
    if FROM_SRC:
        v = tl.load(src_ptr + offs, mask=m, other=0.0)
    else:
        v = tl.zeros([BLOCK], dtype=tl.float32) + value
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=m)


def _launch_fill(out, src=None, value=0.0):
    n = out.numel()
    _fill[(triton.cdiv(n, 1024),)](
        out if src is None else src, out, n, value, FROM_SRC=src is not None, BLOCK=1024
    )
    return out


def forward(x, residual, weight, bias, *, p, eps, seed):
    out = torch.empty_like(x)
    _fill[(1,)](out, out, 1 << 40, 0.0, FROM_SRC=False, BLOCK=1024)
    torch.cuda.synchronize()
    return out
