"""Red team, timing (a) on the GPU: slow the best from the candidate's process. At import it
wraps Triton's launcher so that every kernel but its own is preceded by a ~1 ms GPU spin,
and wraps the `forward` of any other implementation module it finds; then it runs the same
fused kernel as the best. With every implementation in one process this made the best look
slow; in its own worker it can only slow itself, and is exactly as fast as the best."""

import sys

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction


@triton.jit
def _fused_kernel(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, cols, eps, p, seed, BLOCK: tl.constexpr):
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
    keep = tl.rand(seed, row * cols + offs) >= p
    r = tl.load(r_ptr + row * cols + offs, mask=m, other=0.0).to(tl.float32)
    out = r + tl.where(keep, s / (1.0 - p), 0.0)
    tl.store(out_ptr + row * cols + offs, out.to(out_ptr.dtype.element_ty), mask=m)


def _honest(x, residual, weight, bias, p, eps, seed):
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _fused_kernel[(rows,)](
        x,
        residual,
        weight,
        bias,
        out,
        cols,
        eps,
        p,
        seed,
        BLOCK=block,
        num_warps=max(8, min(32, block // 1024)),
    )
    return out


_run = JITFunction.run


def _slowed_run(self, *args, **kwargs):
    if getattr(self.fn, "__module__", "") != __name__:
        torch.cuda._sleep(2_000_000)  # ~1 ms at H200 clocks, in front of someone else's kernel
    return _run(self, *args, **kwargs)


JITFunction.run = _slowed_run
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("kernelloop_impl_") and _name != __name__ and hasattr(_mod, "forward"):
        _inner = _mod.forward
        _mod.forward = lambda *a, _f=_inner, **k: (torch.cuda._sleep(2_000_000), _f(*a, **k))[1]


def forward(x, residual, weight, bias, *, p, eps, seed):
    return _honest(x, residual, weight, bias, p, eps, seed)
