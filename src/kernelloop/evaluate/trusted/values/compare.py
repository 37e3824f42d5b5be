"""Trusted-side comparisons: the candidate's output bytes against a float64 reference."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelloop.task.model_error import as_judged
from kernelloop.task.spec import Tolerance


@dataclass
class Comparison:
    passed: bool
    max_abs_err: float | None
    max_rel_err: float | None
    worst_index: list[int] | None
    reason: str
    category: str = "wrong"
    # max |out - ref| / (atol + rtol·|ref|): the share of the tolerance used (> 1 fails)
    tol_used: float | None = None


def _pair(expected: float | None, got: float | None) -> str:
    """'expected E, got G' for a reason line (both from trusted tensors: the float64
    reference and the candidate's output bytes as this process read them)."""
    if expected is None or got is None:
        return ""
    return f": expected {expected:.6g}, got {got:.6g}"


CHUNK = 1 << 24  # elements compared at a time: ~128 MB per float64 temporary


def _unflat(flat: int, shape: torch.Size) -> list[int]:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d)
        flat //= d
    return list(reversed(idx))


@dataclass
class _Tally:
    """What the comparison keeps of every chunk: counts, maxima and first positions."""

    nonfinite: int = 0
    first_nonfinite: int | None = None
    first_inf_mismatch: int | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ratio: float = -1.0
    worst: int | None = None
    over: int = 0


def _tally(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> _Tally:
    """One pass over the flattened tensors in CHUNK-sized pieces, so the float64 temporaries
    stay small: on the H200 a 4096x393216 float32 output (KernelBench level1/23 softmax)
    compared whole needed ~5 temporaries of 12.9 GB and ran the trusted side out of memory
    (2026-12-01)."""
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    t = _Tally()
    for lo in range(0, o_flat.numel(), CHUNK):
        o = o_flat[lo : lo + CHUNK].to(torch.float64)
        # An integer reference is exact below 2^53; one beyond the output dtype's range is
        # that dtype's infinity, held to the same infinity below (model_error.as_judged).
        r = as_judged(r_flat[lo : lo + CHUNK].to(torch.float64), out.dtype)
        finite_ref = torch.isfinite(r)
        bad = finite_ref & ~torch.isfinite(o)
        if bool(bad.any()):
            t.nonfinite += int(bad.sum().item())
            if t.first_nonfinite is None:
                t.first_nonfinite = lo + int(torch.argmax(bad.to(torch.uint8)).item())
            continue
        if t.nonfinite:
            continue  # the verdict is decided; only the count of non-finite values grows
        # Where the reference is infinite the output must be the same infinity; where it
        # is NaN (an op undefined there, e.g. on a generic extreme case), NaN.
        mismatch = ~finite_ref & (o != r) & ~(torch.isnan(r) & torch.isnan(o))
        if t.first_inf_mismatch is None and bool(mismatch.any()):
            t.first_inf_mismatch = lo + int(torch.argmax(mismatch.to(torch.uint8)).item())
        zero = torch.zeros((), dtype=torch.float64, device=r.device)
        err = torch.where(finite_ref, (o - r).abs(), zero)
        bound = tol.atol + tol.rtol * r.abs()
        ratio = torch.where(finite_ref, err / bound.clamp_min(1e-300), zero)
        rel = err / r.abs().clamp_min(tol.atol if tol.atol > 0 else 1e-300)
        t.max_abs = max(t.max_abs, float(err.max().item()))
        t.max_rel = max(t.max_rel, float(rel.max().item()))
        k = int(torch.argmax(ratio).item())
        if float(ratio[k].item()) > t.max_ratio:  # strictly: the first worst stays
            t.max_ratio, t.worst = float(ratio[k].item()), lo + k
        t.over += int((ratio > 1.0).sum().item())
    return t


def within_tolerance(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """|out - ref| <= atol + rtol·|ref| everywhere; a NaN/Inf where ref is finite fails, and
    where ref is ±Inf or NaN the output must be the same."""
    t = _tally(out, ref, tol)

    if t.first_nonfinite is not None:
        where = _unflat(t.first_nonfinite, out.shape)
        return Comparison(
            False,
            None,
            None,
            where,
            f"{t.nonfinite} non-finite output value(s) where the reference is finite "
            f"(first at {where}{_value_pair(out, ref, where)})",
            "nonfinite",
        )
    if t.first_inf_mismatch is not None:
        where = _unflat(t.first_inf_mismatch, out.shape)
        return Comparison(
            False,
            None,
            None,
            where,
            f"output differs where the reference is infinite (at {where}"
            f"{_value_pair(out, ref, where)})",
            "wrong",
        )
    worst = _unflat(t.worst, out.shape) if t.worst is not None else None
    if t.over:
        return Comparison(
            False,
            t.max_abs,
            t.max_rel,
            worst,
            f"{t.over} of {out.numel()} elements outside atol={tol.atol:g}, rtol={tol.rtol:g} "
            f"(max abs err {t.max_abs:.3g}, worst at "
            f"{worst}{_value_pair(out, ref, worst)})",
            tol_used=max(t.max_ratio, 0.0),
        )
    return Comparison(True, t.max_abs, t.max_rel, worst, "", tol_used=max(t.max_ratio, 0.0))


def _value_pair(out: torch.Tensor, ref: torch.Tensor, where: list[int] | None) -> str:
    """': expected E, got G' at one index (read one element, never a float64 copy)."""
    if where is None or out.numel() == 0:
        return ""
    return _pair(float(ref[tuple(where)].item()), float(out[tuple(where)].item()))
