"""Realistic Triton sources for the history tests (never executed here: only compared)."""

# The parent: one program per row, the whole row in one block.
SOFTMAX_PARENT = '''"""Row softmax, one program per row."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride + offs, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def forward(x):
    out = torch.empty_like(x)
    rows, cols = x.shape
    _softmax_kernel[(rows,)](out, x, cols, x.stride(0), BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
'''

# Rejected as slower: several rows per program, each row still one block.
SOFTMAX_MULTIROW = '''"""Row softmax, several rows per program."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4
ROWS_PER_PROGRAM = 4


@triton.jit
def _softmax_kernel(
    out_ptr, in_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr, ROWS: tl.constexpr
):
    first = tl.program_id(0) * ROWS
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    for i in range(ROWS):
        row = first + i
        if row < n_rows:
            x = tl.load(in_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
            x = x - tl.max(x, axis=0)
            num = tl.exp(x)
            den = tl.sum(num, axis=0)
            tl.store(out_ptr + row * stride + offs, (num / den).to(out_ptr.dtype.element_ty),
                     mask=mask)


def forward(x):
    out = torch.empty_like(x)
    rows, cols = x.shape
    grid = (triton.cdiv(rows, ROWS_PER_PROGRAM),)
    _softmax_kernel[grid](
        out, x, rows, cols, x.stride(0), BLOCK=BLOCK, ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS
    )
    return out
'''

# The same idea again, renamed, re-commented and reformatted (the seed's round 7).
SOFTMAX_MULTIROW_RENAMED = '''\
"""Softmax over rows -- batched rows per CTA to amortize launch overhead."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4
ROWS_PER_PROGRAM = 4  # rows handled by each CTA


@triton.jit
def softmax_rows_batched(dst, src, total_rows, width, row_stride,
                         BLOCK: tl.constexpr, R: tl.constexpr):
    # each CTA walks R consecutive rows
    base_row = tl.program_id(0) * R
    cols = tl.arange(0, BLOCK)
    valid = cols < width
    for j in range(R):
        r = base_row + j
        if r < total_rows:
            vals = tl.load(src + r * row_stride + cols, mask=valid,
                           other=-float("inf")).to(tl.float32)
            vals = vals - tl.max(vals, axis=0)   # numerically safe
            e = tl.exp(vals)
            s = tl.sum(e, axis=0)
            tl.store(dst + r * row_stride + cols, (e / s).to(dst.dtype.element_ty), mask=valid)


def forward(x):
    y = torch.empty_like(x)
    m, n = x.shape
    launch = (triton.cdiv(m, ROWS_PER_PROGRAM),)
    softmax_rows_batched[launch](y, x, m, n, x.stride(0),
                                 BLOCK=BLOCK, R=ROWS_PER_PROGRAM, num_warps=NUM_WARPS)
    return y
'''

# A genuinely different algorithm: online softmax over column chunks, so a row need not
# fit one block (the long-tail rows of 32768 columns).
SOFTMAX_ONLINE = '''\
"""Online softmax: one pass for max and sum over column chunks, one pass to write."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    z = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(
            in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf")
        ).to(tl.float32)
        m_new = tl.maximum(m, x)
        z = z * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, axis=0)
    z_row = tl.sum(z * tl.exp(m - m_row), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(
            in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf")
        ).to(tl.float32)
        y = tl.exp(x - m_row) / z_row
        tl.store(out_ptr + row * stride + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n_cols)


def forward(x):
    out = torch.empty_like(x)
    rows, cols = x.shape
    _softmax_kernel[(rows,)](out, x, cols, x.stride(0), BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
'''


def with_block(source: str, block: int) -> str:
    """A tuner-style variant: only the BLOCK constant changes."""
    return source.replace("BLOCK = 1024", f"BLOCK = {block}", 1)


HYP_MULTIROW = (
    "Process 4 rows per program so each CTA does more work and launch/scheduling overhead "
    "is amortized across rows; expect ~10% on the 16384-row shapes."
)
HYP_MULTIROW_REWORDED = (
    "Batch several rows into every CTA (R=4) to amortize the per-program overhead; fewer, "
    "fatter programs should cut scheduling cost."
)
HYP_ONLINE = (
    "Switch to an online softmax that tracks a running max and rescaled sum over column "
    "chunks, so rows longer than one block (1024x32768) no longer spill registers."
)
