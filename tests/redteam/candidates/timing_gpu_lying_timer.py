"""Red team, timing (c) on the GPU: the fused kernel, honestly computed, but its timing worker's
batch loop gets a new body (a swapped code object: the function object the tamper tripwire
compares is unchanged) that reports every interval at a hundredth. Only the trusted clock
can tell: the saving it claims over the best is not one the trusted side saw."""

import sys

import torch
import triton
import triton.language as tl


def _live(name):
    """The harness's live module: out of `sys.modules` while a candidate runs (issue 45),
    the import system still hands it over."""
    try:
        return sys.modules.get(name) or __import__("importlib").import_module(name)
    except ImportError:
        return None


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


def _lying_batch(self, n, cal_every, seed, key):
    evs, commits = [], []
    self.kept = []
    for j in range(n):
        self._fresh(call_seed(seed, j))  # noqa: F821 - resolved in gpu_timer's globals
        ev = self.dev.once(self.unit, spin=self.spin)
        out = self.graph_out.clone() if self.graph else ev[4]
        evs.append(ev[:4])
        commits.append(digest(out, key))  # noqa: F821
        self.kept.append(out)
    _sync()  # noqa: F821
    self.last = self.kept[-1]
    calls = [(t / 100, s / 100) for t, s in (raw(ev) for ev in evs)]  # noqa: F821
    return {"calls": calls, "cals": [], "commits": commits}


_gpu = _live("kernelloop.evaluate.worker.gpu_timer")
if _gpu is not None:
    _gpu.GpuSlot.batch.__code__ = _lying_batch.__code__


def forward(x, residual, weight, bias, *, p, eps, seed):
    return _honest(x, residual, weight, bias, p, eps, seed)
