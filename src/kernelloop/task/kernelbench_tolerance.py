"""A tolerance for an imported KernelBench problem that can reject a trivial output.

KernelBench checks float32 at atol = rtol = 1e-2. Where a problem's outputs are much
smaller than that (a softmax over 4096 positions: every value near 2.4e-4), its check
accepts an all-zero or constant output, and kernelloop's sensitivity proof refuses every
evaluation as proving nothing. The importer runs the problem on its CPU shapes and, where
a zero or constant output would pass at all of them, tightens the tolerance to a small
share of the outputs' spread (said at import, written in task.toml; `--atol`/`--rtol`
choose one instead).
"""

from __future__ import annotations

import math

import torch

SHARE = 1e-3  # the tightened atol: this share of the smallest output spread, a power of ten
RTOL_SHARE = 0.1  # where a large offset is the hole: rtol this share of spread / magnitude
# rtol is never tightened below what the dtype's honest rounding needs (a float32 conv or
# GEMM is ~1e-5 off a float64 reference; KernelBench level2/36 at rtol 1e-9 failed 126 of
# 128 elements): where only a smaller one would reject a trivial output, nothing changes.
RTOL_FLOOR = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def _passes(trivial: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    return bool(((trivial - ref).abs() <= atol + rtol * ref.abs()).all())


def _trivial_passes(outputs: list[list[torch.Tensor]], atol: float, rtol: float) -> bool:
    """Whether zeros, or each output's mean everywhere, pass the check on every call
    (one list of outputs per shape and input case; the sensitivity proof needs one check,
    anywhere, to reject each)."""
    for make in (torch.zeros_like, lambda o: torch.full_like(o, float(o.mean()))):
        if all(_passes(make(o), o, atol, rtol) for outs in outputs for o in outs):
            return True
    return False


def _down(x: float) -> float:
    return 10.0 ** math.floor(math.log10(x))


def tightened(
    outputs: list[list[torch.Tensor]], atol: float, rtol: float, dtype: str
) -> tuple[float, float] | None:
    """(atol, rtol) at which neither a zero nor a constant output passes on every call,
    given each call's float64 reference outputs (every CPU shape and input case the judge
    runs); None where (atol, rtol) already reject them, or where no tolerance the dtype's
    rounding allows can (the outputs are constant, or a large offset hides them)."""
    outputs = [outs for outs in outputs if outs]
    if not outputs or not _trivial_passes(outputs, atol, rtol):
        return None
    spread = min(float(o.max() - o.min()) for outs in outputs for o in outs)
    if spread <= 0.0:
        return None
    new_atol = min(atol, _down(SHARE * spread))
    if not _trivial_passes(outputs, new_atol, rtol):
        return new_atol, rtol
    top = max(float(o.abs().max()) for outs in outputs for o in outs)
    new_rtol = min(rtol, _down(RTOL_SHARE * spread / top))
    if new_rtol >= RTOL_FLOOR.get(dtype, 1e-2) and not _trivial_passes(outputs, new_atol, new_rtol):
        return new_atol, new_rtol
    return None
