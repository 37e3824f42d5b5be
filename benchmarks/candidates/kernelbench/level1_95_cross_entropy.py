"""KernelBench level1/95 (CrossEntropyLoss): mean cross-entropy of float logits against
integer class targets, in two Triton kernels and one read of the logits.

1. `_row_loss`: each program takes ROWS rows and streams them once in column tiles with
   an online log-sum-exp per row: the tile's max raises the running max m, the running
   sum of exp(x - m) is rescaled by exp(old m - new m) (one scalar per row and tile) and
   the tile's exp(x - m) added, so each logit costs one exp; the target's logit is picked
   out of the tile that holds it. The row's loss `m + log(sum) - x[target]` goes to a
   float32 buffer (0, weight 0, for a row whose target is `ignore_index` = -100, as
   `F.cross_entropy` does).
2. `_mean`: one program sums the per-row losses and weights in a fixed order and divides:
   the 0-dim mean loss, bit-for-bit the same on every call (no atomics).

Why it should be fast on an H200: the op is bound by reading the logits (32768 x 4096
float32 = 512 MiB at the problem's size, ~0.11 ms at ~4.8 TB/s). Eager PyTorch
materialises `log_softmax` (a 512 MiB read and a 512 MiB write), then gathers from it and
reduces; here every logit is read once and nothing of the logits' size is written. A
4096-class row is one 16 KiB tile per program (16 float32 per thread at 8 warps, 32768
programs); wider rows loop. The mean over 32768 floats is a few microseconds.
Measured on the H200 (2026-12-01, CUDA events, no L2 flush, before the one-exp-per-logit
rewrite, when every logit cost three exps): 0.42 ms against eager's 0.44 ms.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

IGNORE_INDEX = -100


@triton.jit
def _row_loss(
    x_ptr, t_ptr, loss_ptr, w_ptr, n_rows, n_cols, stride_row, ignore_index,
    ROWS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    rows_c = tl.where(row_ok, rows, 0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    target = tl.load(t_ptr + rows_c)
    base = x_ptr + rows_c[:, None] * stride_row
    m = tl.full([ROWS], float("-inf"), tl.float32)  # running row max
    s = tl.zeros([ROWS], tl.float32)  # running sum of exp(x - m)
    picked = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs[None, :]
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        # shift by 0 while everything seen is -inf (masked columns, -inf logits): then
        # exp(x - shift) and the rescale are 0, never exp(-inf - -inf) = nan
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        e = tl.exp(x - shift[:, None])
        s = s * tl.exp(m - shift) + tl.sum(e, axis=1)
        m = m_new
        picked += tl.sum(tl.where(cols == target[:, None], x, 0.0), axis=1)
    lse = m + tl.log(s)
    valid = target != ignore_index
    loss = tl.where(valid, lse - picked, 0.0)
    tl.store(loss_ptr + rows, loss, mask=row_ok)
    tl.store(w_ptr + rows, tl.where(valid, 1.0, 0.0), mask=row_ok)


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
        # a tile of ~4096 logits per program on the GPU (one 4096-class row), ~64K under
        # the interpreter (which pays per program, not per element)
        tile = 4096 if x.device.type == "cuda" else 65536
        rows = max(1, min(tile // block, triton.next_power_of_2(n_rows)))
        warps = 8 if rows * block >= 2048 else 4
        _row_loss[(triton.cdiv(n_rows, rows),)](
            x, t, losses, weights, n_rows, n_cols, x.stride(0), IGNORE_INDEX,
            ROWS=rows, BLOCK=block, num_warps=warps,
        )  # fmt: skip
        out = torch.empty((), device=x.device, dtype=predictions.dtype)
        _mean[(1,)](losses, weights, out, n_rows, BLOCK=1024, num_warps=4)
        return out
