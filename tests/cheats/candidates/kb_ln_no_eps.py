"""Red team (issue 45, class 5): KernelBench level1/40 LayerNorm without eps — right wherever a
row's variance dwarfs 1e-5.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _chunk_stats(x_ptr, mean_ptr, m2_ptr, n, n_chunks, CHUNK: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    base = row * n + chunk * CHUNK
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for t in range(0, CHUNK, TILE):
        idx = chunk * CHUNK + t + tl.arange(0, TILE)
        mask = idx < n
        x = tl.load(x_ptr + base + t + tl.arange(0, TILE), mask=mask, other=0.0).to(tl.float32)
        k = tl.sum(mask.to(tl.float32), 0)
        if k > 0:
            tmean = tl.sum(x, 0) / k
            d = tl.where(mask, x - tmean, 0.0)
            tm2 = tl.sum(d * d, 0)
            total = count + k
            delta = tmean - mean
            mean = mean + delta * (k / total)
            m2 = m2 + tm2 + delta * delta * (count * k / total)
            count = total
    tl.store(mean_ptr + row * n_chunks + chunk, mean)
    tl.store(m2_ptr + row * n_chunks + chunk, m2)


@triton.jit
def _normalize(
    x_ptr, w_ptr, b_ptr, mean_ptr, m2_ptr, out_ptr, n, n_chunks, eps,
    CHUNK: tl.constexpr, TILE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for c in range(0, n_chunks):
        k = tl.minimum(n - c * CHUNK, CHUNK).to(tl.float32)
        cmean = tl.load(mean_ptr + row * n_chunks + c)
        cm2 = tl.load(m2_ptr + row * n_chunks + c)
        total = count + k
        delta = cmean - mean
        mean = mean + delta * (k / total)
        m2 = m2 + cm2 + delta * delta * (count * k / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / count)
    for t in range(0, CHUNK, TILE):
        idx = chunk * CHUNK + t + tl.arange(0, TILE)
        mask = idx < n
        x = tl.load(x_ptr + row * n + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_ptr + row * n + idx, y.to(out_ptr.dtype.element_ty), mask=mask)


def forward(*, x, ln_weight, ln_bias):
    x = x.contiguous()
    n = ln_weight.numel()
    rows = x.numel() // n
    out = torch.empty_like(x)
    if x.is_cuda:
        tile, chunk, warps = 2048, 32768, 8
    else:
        tile, chunk, warps = 64, 256, 4
    n_chunks = triton.cdiv(n, chunk)
    mean = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
    m2 = torch.empty_like(mean)
    grid = (rows, n_chunks)
    _chunk_stats[grid](x, mean, m2, n, n_chunks, CHUNK=chunk, TILE=tile, num_warps=warps)
    _normalize[grid](
        x, ln_weight.contiguous(), ln_bias.contiguous(), mean, m2, out, n, n_chunks, 1e-5,
        CHUNK=chunk, TILE=tile, num_warps=warps,
    )  # fmt: skip
    return out
