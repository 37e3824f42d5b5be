"""KernelBench level1/95 (cross entropy, mean over 32768 rows of 4096 float32 logits).

Hypothesis: One program per row holds its 4096 logits in registers: max, log-sum-exp and
the target's logit from one read, the row's loss stored; a second one-program kernel sums
the 32768 losses in a fixed order and divides by the count (deterministic: no atomics).
Eager runs log_softmax (read, write) then nll_loss (read) and a mean.
Predicted effect: 0.54 GB read once, ~0.13 ms at the floor's pace on an H200; ~2-3x of
eager.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_loss(x_ptr, t_ptr, loss_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < C
    x = tl.load(x_ptr + row * C + c, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), 0))
    target = tl.load(t_ptr + row)
    picked = tl.sum(tl.where(c == target, x, 0.0), 0)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def _mean(loss_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, n, BLOCK):
        i = s + tl.arange(0, BLOCK)
        acc += tl.load(loss_ptr + i, mask=i < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, 0) / n)


def forward(*, predictions, targets):
    x = predictions.contiguous()
    rows, classes = x.shape
    losses = torch.empty(rows, device=x.device, dtype=torch.float32)
    block = triton.next_power_of_2(classes)
    _row_loss[(rows,)](x, targets.contiguous(), losses, classes, BLOCK=block,
                       num_warps=8 if x.is_cuda else 4)  # fmt: skip
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _mean[(1,)](losses, out, rows, BLOCK=1024, num_warps=8 if x.is_cuda else 4)
    return out.to(predictions.dtype)
