"""What both sides of the trust boundary agree on, and nothing else.

The worker (`evaluate/worker/`, inside the sandbox) and the judge (`evaluate/trusted/`)
never import each other; the few definitions they must share live here: which aten ops
are allocation or views (not compute), how a slot's samples are summarised, and how the
A/A slot is named. No torch import: the trusted side reads these without pulling in
anything the worker runs.
"""

from __future__ import annotations

import statistics

# Aten ops that only allocate, view or describe tensors. Anything else called during a
# candidate's forward is PyTorch doing compute, which the trusted side reports.
ALLOC_VIEW_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "_unsafe_view",
    "reshape", "as_strided", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "select",
    "slice", "detach", "alias", "lift_fresh", "unbind", "split", "chunk", "contiguous", "flatten",
    "stride", "size", "numel", "dim", "is_contiguous", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "_local_scalar_dense", "is_same_size",
    # Filling is not the op's compute (an accumulator for atomics starts at zero); an
    # output that is only a fill is caught by the trivial-output checks.
    "zeros", "zeros_like", "zero_", "fill_", "full", "full_like", "new_zeros", "new_full",
}


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    """Median, p20 and p80 (used by both sides, so they agree on the definition)."""
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return statistics.median(xs), q[1], q[7]


def aa_slot(impl: str) -> str:
    return f"{impl}#aa"
