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
def digest_kernel(w_ptr, n, k_ptr, out_ptr, BLOCK: tl.constexpr):
    """Lane sums of one output's words into out_ptr[0:4]; k_ptr: the 12 lane keys (int64,
    one device tensor per batch: a launch with 4 arguments costs the host less than one with
    15, which is what a short unit's run-through time is made of)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    w = tl.load(w_ptr + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
    i = offs.to(tl.uint32)
    for lane in tl.static_range(4):
        k1 = tl.load(k_ptr + 3 * lane).to(tl.uint32)
        k2 = tl.load(k_ptr + 3 * lane + 1).to(tl.uint32)
        k3 = tl.load(k_ptr + 3 * lane + 2).to(tl.uint32)
        _lane(w, i, m, out_ptr + lane, k1, k2, k3)
