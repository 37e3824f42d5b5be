"""The commitment digest (kernelloop.evaluate.commitment) as one Triton kernel: one pass
over the output, four lanes, exact int64 sums. Imported only where it runs (a worker on a
GPU, or a test), so importing the commitment never imports Triton."""

import triton
import triton.language as tl


@triton.jit
def _lane(lo, hi, i, m, out_ptr, a, b, c, d):
    x = (lo * a + hi * c + i * b + d) % 2147483647
    s = tl.where(m, (x * x) % 2147483647, 0)
    tl.atomic_add(out_ptr, tl.sum(s, axis=0))


@triton.jit
def digest_kernel(w_ptr, n, out_ptr, a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2,
                  a3, b3, c3, d3, BLOCK: tl.constexpr):  # fmt: skip
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    w = tl.load(w_ptr + offs, mask=m, other=0).to(tl.int64)
    lo = w & 65535
    hi = (w >> 16) & 65535
    i = offs % 2147483647
    _lane(lo, hi, i, m, out_ptr + 0, a0, b0, c0, d0)
    _lane(lo, hi, i, m, out_ptr + 1, a1, b1, c1, d1)
    _lane(lo, hi, i, m, out_ptr + 2, a2, b2, c2, d2)
    _lane(lo, hi, i, m, out_ptr + 3, a3, b3, c3, d3)
