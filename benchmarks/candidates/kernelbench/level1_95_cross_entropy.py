"""KernelBench level1/95 (CrossEntropyLoss): mean cross-entropy of float logits against
integer class targets, in two Triton kernels and one read of the logits.

1. `_row_loss`: each program takes ROWS rows and streams each row once in column tiles,
   keeping an online log-sum-exp (running max, running sum of exp(x - max), rescaled when
   the max grows) and picking the target's logit out of the tile that holds it; the row's
   loss is `max + log(sum) - x[target]`, written to a float32 buffer (0 for a row whose
   target is `ignore_index`, -100, as `F.cross_entropy` does; its weight 0).
2. `_mean`: one program sums the per-row losses and weights in a fixed order and divides:
   the 0-dim mean loss, bit-for-bit the same on every call (no atomics).

Why it is fast on an H200: the op is bound by reading the logits (32768 x 4096 float32 =
512 MiB at the problem's size, ~0.11 ms at ~4.8 TB/s). Eager PyTorch materialises
`log_softmax` (a read and a 512 MiB write) and then gathers and reduces it, about three
times the traffic; here every logit is read once and nothing of the logits' size is
written. A 4096-class row is one 16 KiB tile (16 float32 per thread at 8 warps), so the
online rescale runs once per row; wider rows loop. The mean over 32768 floats is a few
microseconds.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

IGNORE_INDEX = -100


@triton.jit
def _row_loss(
    x_ptr,
    t_ptr,
    loss_ptr,
    w_ptr,
    n_rows,
    n_cols,
    stride_row,
    ignore_index,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = pid * ROWS + r
        if row < n_rows:
            base = x_ptr + row.to(tl.int64) * stride_row
            target = tl.load(t_ptr + row)
            m = tl.full([BLOCK], float("-inf"), tl.float32)
            s = tl.zeros([BLOCK], tl.float32)
            picked = tl.zeros([BLOCK], tl.float32)
            for start in range(0, n_cols, BLOCK):
                cols = start + offs
                mask = cols < n_cols
                x = tl.load(base + cols, mask=mask, other=float("-inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                # lanes still at -inf (masked tail of a first tile) keep s = 0
                alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
                p = tl.where(mask, tl.exp(x - m_new), 0.0)
                s = s * alpha + p
                m = m_new
                picked += tl.where(cols == target, x, 0.0)
            row_max = tl.max(m, axis=0)
            total = tl.sum(s * tl.exp(m - row_max), axis=0)
            lse = row_max + tl.log(total)
            valid = target != ignore_index
            loss = tl.where(valid, lse - tl.sum(picked, axis=0), 0.0)
            tl.store(loss_ptr + row, loss)
            tl.store(w_ptr + row, tl.where(valid, 1.0, 0.0))


@triton.jit
def _mean(loss_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    cnt = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        idx = start + offs
        mask = idx < n
        acc += tl.load(loss_ptr + idx, mask=mask, other=0.0)
        cnt += tl.load(w_ptr + idx, mask=mask, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / tl.sum(cnt, axis=0))


class ModelNew(nn.Module):
    """Cross-entropy loss (mean over the batch) of (batch, classes) logits."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        x = predictions if predictions.stride(-1) == 1 else predictions.contiguous()
        t = targets.contiguous()
        n_rows, n_cols = x.shape
        losses = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        weights = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        block = min(triton.next_power_of_2(n_cols), 4096)
        rows = 4 if n_cols <= 1024 else 1  # narrow rows: a few per program
        warps = 8 if block >= 2048 else 4
        _row_loss[(triton.cdiv(n_rows, rows),)](
            x, t, losses, weights, n_rows, n_cols, x.stride(0), IGNORE_INDEX,
            ROWS=rows, BLOCK=block, num_warps=warps,
        )  # fmt: skip
        out = torch.empty((), device=x.device, dtype=predictions.dtype)
        _mean[(1,)](losses, weights, out, n_rows, BLOCK=1024, num_warps=4)
        return out
