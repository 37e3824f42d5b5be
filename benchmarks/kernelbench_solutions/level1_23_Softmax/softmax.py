"""KernelBench level1/23 (Softmax over dim 1 of a 4096 x 393216 float32 matrix).

Hypothesis: Split each 1.5 MiB row into chunks so every SM has work: pass 1 gives each
(row, chunk) its max and its sum of exp(x - max) in one streaming read (online rescale per
tile); pass 2 combines a row's chunk statistics and writes exp(x - M) / S. Two reads and
one write, where eager's softmax for rows wider than shared memory reads three times.
Predicted effect: ~3 x 6.4 GB of traffic, ~4.5-5 ms on an H200, ~1.2x of eager.

Every max and sum is float32 with the max subtracted first (no overflow on x100 logits);
the combine runs in the same order in every program, so the result is deterministic.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _stats(x_ptr, m_ptr, s_ptr, cols, n_chunks, CHUNK: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    base = x_ptr + row * cols
    start = chunk * CHUNK
    m = -float("inf")
    s = 0.0
    for t in range(0, CHUNK, TILE):
        offs = start + t + tl.arange(0, TILE)
        x = tl.load(base + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        # a tile wholly past the end leaves m at -inf: exp(-inf - -inf) would be NaN
        safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), 0)
        m = m_new
    tl.store(m_ptr + row * n_chunks + chunk, m)
    tl.store(s_ptr + row * n_chunks + chunk, s)


@triton.jit
def _normalize(
    x_ptr, m_ptr, s_ptr, out_ptr, cols, n_chunks,
    CHUNK: tl.constexpr, TILE: tl.constexpr, NC: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = tl.arange(0, NC)
    cm = tl.load(m_ptr + row * n_chunks + c, mask=c < n_chunks, other=-float("inf"))
    cs = tl.load(s_ptr + row * n_chunks + c, mask=c < n_chunks, other=0.0)
    big = tl.max(cm, 0)
    total = tl.sum(tl.where(cm == -float("inf"), 0.0, cs * tl.exp(cm - big)), 0)
    inv = 1.0 / total
    base = row * cols
    start = chunk * CHUNK
    for t in range(0, CHUNK, TILE):
        offs = start + t + tl.arange(0, TILE)
        mask = offs < cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - big) * inv
        tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def forward(*, x):
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    if x.is_cuda:
        tile, chunk, warps = 4096, 16384, 8
    else:  # the interpreter: small tiles, few programs
        tile, chunk, warps = 64, 128, 4
    n_chunks = triton.cdiv(cols, chunk)
    m = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
    s = torch.empty_like(m)
    grid = (rows, n_chunks)
    _stats[grid](x, m, s, cols, n_chunks, CHUNK=chunk, TILE=tile, num_warps=warps)
    nc = max(16, triton.next_power_of_2(n_chunks))
    _normalize[grid](x, m, s, out, cols, n_chunks, CHUNK=chunk, TILE=tile, NC=nc,
                     num_warps=warps)  # fmt: skip
    return out
