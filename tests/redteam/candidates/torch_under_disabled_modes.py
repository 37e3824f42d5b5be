"""Red team, issue 12 class 2: all the compute in PyTorch (float64), hidden from the
dispatch-mode recorder by `_disable_current_modes()`, plus one trivial copy kernel so that
the launch check sees a launch of its own. Correct on every suite; must be `no_kernel`."""

import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


def forward(x, residual, weight, bias, *, p, eps, seed):
    with _disable_current_modes():
        y = torch.nn.functional.layer_norm(
            x.double(), x.shape[-1:], weight.double(), bias.double(), eps
        )
        s = torch.softmax(y, dim=-1)
        g = torch.Generator(device=x.device).manual_seed(int(seed))
        keep = torch.rand(s.shape, generator=g, device=x.device, dtype=torch.float64) >= p
        scale = 1.0 / (1.0 - p) if p < 1 else 0.0
        full = (
            (residual.double() + torch.where(keep, s * scale, torch.zeros_like(s)))
            .to(x.dtype)
            .contiguous()
        )
    out = torch.empty_like(x)
    n = full.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](full, out, n, BLOCK=1024)
    return out
