"""A Triton RNN cell for the candidates the KernelBench import tests write (test_draws,
test_kernelbench_follow): out[r] = tanh(w[:, :n_in] @ x[r] + w[:, n_in:] @ h[r] + b), one
row per program, times keep[r] * scale where KEEP (a dropout mask the candidate drew)."""

CELL_KERNEL = """
@triton.jit
def _cell(x_ptr, h_ptr, w_ptr, b_ptr, keep_ptr, out_ptr, n_in, n_h, scale,
          BK: tl.constexpr, BH: tl.constexpr, KEEP: tl.constexpr):
    r = tl.program_id(0)
    k = tl.arange(0, BK)
    j = tl.arange(0, BH)
    mj = j < n_h
    x = tl.load(x_ptr + r * n_in + k, mask=k < n_in, other=0.0)
    h = tl.load(h_ptr + r * n_h + k, mask=k < n_h, other=0.0)
    row = w_ptr + j[:, None] * (n_in + n_h)
    wx = tl.load(row + k[None, :], mask=mj[:, None] & (k[None, :] < n_in), other=0.0)
    wh = tl.load(row + n_in + k[None, :], mask=mj[:, None] & (k[None, :] < n_h), other=0.0)
    v = tl.sum(wx * x[None, :], axis=1) + tl.sum(wh * h[None, :], axis=1)
    v += tl.load(b_ptr + j, mask=mj, other=0.0)
    e = tl.exp(-2.0 * tl.abs(v))
    t = tl.where(v < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e)
    if KEEP:
        t = t * tl.load(keep_ptr + r * n_h + j, mask=mj, other=0.0) * scale
    tl.store(out_ptr + r * n_h + j, t, mask=mj)
"""
