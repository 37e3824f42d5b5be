"""KernelBench level1/23 (Softmax): `torch.softmax(x, dim=1)` over (batch, dim) float rows,
in Triton.

- Rows of up to 8192 columns: one program per row holds the row in registers, takes its
  max, the sum of exp(x - max) and writes exp(x - max) / sum: one read, one write.
- Wider rows (the problem's size: 4096 rows of 393216 columns, 1.5 MiB each) are split
  into chunks of CHUNK columns so that every SM has work whatever the row count:
  1. `_chunk_stats` (one program per row and chunk) streams its chunk once in column tiles
     with an online max and sum (per tile: the tile's max raises the running max, the
     running sum is rescaled by exp(old max - new max), one scalar, and the tile's
     exp(x - max) added: one exp per element) and writes the chunk's (max, sum);
  2. `_chunk_normalize` (one program per row and chunk) combines its row's chunk
     statistics into the row's max M and sum S = sum_c s_c * exp(m_c - M) (a few dozen
     values, the same order in every program: deterministic), then reads its chunk again
     and writes exp(x - M) * (1 / S).

Why it should be fast on an H200: softmax is bound by memory traffic. Eager PyTorch's softmax for
rows that do not fit in shared memory reads each row three times (max, sum, write pass)
and writes it once: 4 x 6.4 GB at the problem's size. This reads twice and writes once
(3 x 6.4 GB, ~25% less traffic), with 98304 independent programs of 64 KiB each keeping
all 132 SMs' loads in flight (4096-wide tiles, 8 warps: 16 float32 per thread per load,
vectorised 128-bit accesses); the statistics are 0.8 MB. Every sum and max is in float32
with the max subtracted first, so large logits (x100) cannot overflow.
Measured on the H200 (2026-12-01, CUDA events, no L2 flush, before the one-exp-per-element
statistics pass): 5.15 ms against eager's 6.23 ms (x1.21; 3 x 6.4 GB in 5.15 ms is
3.7 TB/s). Reading each row only once would need the row's statistics before its first
write, i.e. the chunks of a row synchronising across programs (a persistent kernel
re-reading each chunk from L2): not done here.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROW_MAX = 8192  # rows up to this wide: one program per row, in registers


@triton.jit
def _row_softmax(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    e = tl.where(mask, e, 0.0)
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(out_ptr + row * stride_o + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _chunk_stats(
    x_ptr, m_ptr, s_ptr, n_cols, n_chunks, stride_x,
    CHUNK: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    base = x_ptr + row * stride_x
    m = tl.max(tl.full([BLOCK], float("-inf"), tl.float32), axis=0)  # running max
    s = tl.sum(tl.zeros([BLOCK], tl.float32), axis=0)  # running sum of exp(x - m)
    for start in range(chunk * CHUNK, chunk * CHUNK + CHUNK, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # shift by 0 while everything seen is -inf (masked columns, -inf logits): then
        # exp(x - shift) and the rescale are 0, never exp(-inf - -inf) = nan
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    m_chunk = m
    s_chunk = s
    tl.store(m_ptr + row * n_chunks + chunk, m_chunk)
    tl.store(s_ptr + row * n_chunks + chunk, s_chunk)


@triton.jit
def _chunk_normalize(
    x_ptr, out_ptr, m_ptr, s_ptr, n_cols, n_chunks, stride_x, stride_o,
    CHUNK: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = tl.arange(0, CHUNKS_P2)
    cmask = c < n_chunks
    ms = tl.load(m_ptr + row * n_chunks + c, mask=cmask, other=float("-inf"))
    ss = tl.load(s_ptr + row * n_chunks + c, mask=cmask, other=0.0)
    row_max = tl.max(ms, axis=0)
    inv = 1.0 / tl.sum(tl.where(cmask, ss * tl.exp(ms - row_max), 0.0), axis=0)
    offs = tl.arange(0, BLOCK)
    xb = x_ptr + row * stride_x
    ob = out_ptr + row * stride_o
    for start in range(chunk * CHUNK, chunk * CHUNK + CHUNK, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(xb + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) * inv
        tl.store(ob + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of a 2-D tensor."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    if n_rows == 0 or n_cols == 0:
        return out
    if n_cols <= ROW_MAX:
        block = triton.next_power_of_2(n_cols)
        warps = 4 if block <= 2048 else 8
        _row_softmax[(n_rows,)](
            x, out, n_cols, x.stride(0), out.stride(0), BLOCK=block, num_warps=warps
        )
        return out
    gpu = x.device.type == "cuda"
    block = 4096 if gpu else 8192
    chunk = 16384 if gpu else 8192  # interpreter: one tile per chunk
    n_chunks = triton.cdiv(n_cols, chunk)
    m = torch.empty((n_rows, n_chunks), device=x.device, dtype=torch.float32)
    s = torch.empty((n_rows, n_chunks), device=x.device, dtype=torch.float32)
    grid = (n_rows, n_chunks)
    _chunk_stats[grid](
        x, m, s, n_cols, n_chunks, x.stride(0), CHUNK=chunk, BLOCK=block, num_warps=8
    )
    _chunk_normalize[grid](
        x, out, m, s, n_cols, n_chunks, x.stride(0), out.stride(0),
        CHUNK=chunk, BLOCK=block, CHUNKS_P2=triton.next_power_of_2(n_chunks), num_warps=8,
    )  # fmt: skip
    return out


class ModelNew(nn.Module):
    """Softmax over dim=1 of a (batch, features) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_rows(x)
