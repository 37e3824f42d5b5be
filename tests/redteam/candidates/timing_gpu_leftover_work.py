"""Red team, timing (d) on the GPU: leave work on the GPU for the others' turns. A thread
started at import keeps ~50 ms GPU spins queued on a side stream; when the candidate is
stopped after its batch, what is queued still runs, during the next worker's turn. The
non-candidate workers' idle probes around their batches must see it."""

import threading
import time

import torch
import triton
import triton.language as tl


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


def _keep_busy():
    side = torch.cuda.Stream()
    while True:
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # ~50 ms at H200 clocks
        time.sleep(0.001)


threading.Thread(target=_keep_busy, daemon=True).start()


def forward(x, residual, weight, bias, *, p, eps, seed):
    return _honest(x, residual, weight, bias, p, eps, seed)
