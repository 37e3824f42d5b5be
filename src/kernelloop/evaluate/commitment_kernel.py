"""The commitment digest (kernelloop.evaluate.commitment) as one Triton kernel: one pass
over the output, four lanes of 32-bit mixing (wrapping uint32 multiplies), exact int64
sums. Imported only where it runs (a worker on a GPU, or a test), so importing the
commitment never imports Triton."""

import triton
import triton.language as tl


@triton.jit
def _lane(w, i, m, out_ptr, k1, k2, k3):
    x = (w ^ (i * k1)) * k2
    x = x ^ (x >> 15)
    x = x * k3
    x = x ^ (x >> 13)
    s = tl.where(m, x.to(tl.int64), 0)
    tl.atomic_add(out_ptr, tl.sum(s, axis=0))


@triton.jit
def digest_kernel(w_ptr, n, out_ptr, a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3,
                  BLOCK: tl.constexpr):  # fmt: skip
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    w = tl.load(w_ptr + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
    i = offs.to(tl.uint32)
    _lane(w, i, m, out_ptr + 0, a0.to(tl.uint32), b0.to(tl.uint32), c0.to(tl.uint32))
    _lane(w, i, m, out_ptr + 1, a1.to(tl.uint32), b1.to(tl.uint32), c1.to(tl.uint32))
    _lane(w, i, m, out_ptr + 2, a2.to(tl.uint32), b2.to(tl.uint32), c2.to(tl.uint32))
    _lane(w, i, m, out_ptr + 3, a3.to(tl.uint32), b3.to(tl.uint32), c3.to(tl.uint32))
