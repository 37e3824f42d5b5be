"""Trusted-side checks of a stochastic (dropout-like) output: each element its kept or its
dropped value, the dropped fraction's binomial test overall and by stratum, and the
independence of the masks of rows and columns (the tests themselves: mask_stats.py).

The kept and dropped values of an element differ by one term (the flagship's softmax
value scaled by 1/(1-p)); the rest (the residual) is common to both. So each element is
held to a tolerance on that term — `atol + rtol·|kept − dropped|` — plus one unit in the
last place of the output dtype at the value, for the one rounding of the sum that the
output's dtype forces. A tolerance relative to the value itself (|out| ≈ |residual| ≈ 1)
hid the term (~1e-4) entirely: a kernel that returned the residual alone wherever
|residual| was large passed every check on the CPU (issue 33, 2026-12-03).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernelloop.evaluate.trusted.values.compare import CHUNK, _unflat
from kernelloop.evaluate.trusted.values.mask_stats import (
    lags_problem,
    strata_counts,
    strata_problem,
)
from kernelloop.task.spec import Tolerance

# Fewest decidable pairs of neighbouring elements for the independence test to say
# anything: with fewer, even a mask shared by every row fits 2p(1-p) within ±6σ.
MIN_PAIRS = 200


@dataclass
class MaskInference:
    ok: bool
    reason: str
    dropped: torch.Tensor | None  # bool, True where dropped (only where decidable)
    decidable: torch.Tensor | None
    max_abs_err: float | None = None
    category: str = "wrong"  # of a failure: "wrong" or "nonfinite"
    strata: dict | None = None  # {stratum: (decidable, dropped)} once rate_problem ran


def ulp(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype`'s values in the binade holding |v| (float64 in and out),
    never below the dtype's smallest subnormal."""
    info = torch.finfo(dtype)
    a = v.abs()
    _, e = torch.frexp(a)  # a = m·2^e, m in [0.5, 1): the binade [2^(e-1), 2^e)
    u = torch.ldexp(torch.full_like(a, info.eps), e - 1)
    smallest = info.tiny * info.eps  # the subnormals' spacing (and zero's)
    return torch.where(a == 0, smallest, u).clamp_min(smallest)


def infer_mask(
    out: torch.Tensor, ref_keep: torch.Tensor, ref_drop: torch.Tensor, tol: Tolerance
) -> MaskInference:
    """Every element must equal its kept value (the reference with every element kept and
    scaled) or its dropped value, within `atol + rtol·|kept − dropped|` plus one unit of
    the output's dtype at that value (its rounding of the sum). Where a reference is beyond
    the dtype's range, its rounding (an infinity) is the value. In CHUNK-sized pieces, so
    the float64 temporaries stay small on a GPU-sized output."""
    dtype = out.dtype if out.is_floating_point() else torch.float64
    o_flat, k_flat, d_flat = out.reshape(-1), ref_keep.reshape(-1), ref_drop.reshape(-1)
    dropped = torch.zeros(o_flat.shape, dtype=torch.bool, device=out.device)
    decidable = torch.zeros_like(dropped)
    n_bad = n_neither = 0
    first_bad = worst = None
    worst_ratio, top = -1.0, 0.0
    for lo in range(0, o_flat.numel(), CHUNK):
        o = o_flat[lo : lo + CHUNK].to(torch.float64)
        keep, drop = k_flat[lo : lo + CHUNK], d_flat[lo : lo + CHUNK]
        gap = (keep - drop).abs()
        slack = tol.atol + tol.rtol * gap
        b_keep, b_drop = slack + ulp(keep, dtype), slack + ulp(drop, dtype)
        e_keep, e_drop = (o - keep).abs(), (o - drop).abs()
        m_keep = (e_keep <= b_keep) | (o == keep.to(dtype).to(torch.float64))
        m_drop = (e_drop <= b_drop) | (o == drop.to(dtype).to(torch.float64))
        finite = torch.isfinite(keep.to(dtype)) & torch.isfinite(drop.to(dtype))
        bad = ~torch.isfinite(o) & finite
        if bool(bad.any()):
            n_bad += int(bad.sum().item())
            if first_bad is None:
                first_bad = lo + int(torch.argmax(bad.to(torch.uint8)).item())
            continue
        if n_bad:
            continue  # decided: only the count of non-finite values grows
        err = torch.minimum(e_keep, e_drop).nan_to_num(nan=math.inf)
        neither = ~(m_keep | m_drop)
        if bool(neither.any()):
            n_neither += int(neither.sum().item())
            ratio = torch.where(neither, err / torch.minimum(b_keep, b_drop), -1.0)
            k = int(torch.argmax(ratio).item())
            if float(ratio[k].item()) > worst_ratio:
                worst_ratio, worst = float(ratio[k].item()), lo + k
        if not n_neither:
            top = max(top, float(torch.where(torch.isfinite(err), err, 0.0).max().item()))
            dropped[lo : lo + CHUNK] = m_drop & ~m_keep
            # Decidable where the two values' tolerance intervals are disjoint: a property
            # of the references alone, never of the output. Deciding from the output biased
            # the dropped fraction low (0.0991 for p=0.1 on 1024x32768 bf16 on the H200,
            # 2026-11-29): tiny kept values stayed decidable, tiny dropped ones not.
            decidable[lo : lo + CHUNK] = (gap > b_keep + b_drop) & torch.isfinite(gap)
    if first_bad is not None:
        return MaskInference(
            False,
            f"{n_bad} non-finite output value(s) where the kept and dropped values are finite "
            f"(first at {_unflat(first_bad, out.shape)})",
            None,
            None,
            category="nonfinite",
        )
    if worst is not None:
        at = _unflat(worst, out.shape)
        keep, drop = float(k_flat[worst].item()), float(d_flat[worst].item())
        got = float(o_flat[worst].item())
        gap = abs(keep - drop)
        bound = tol.atol + tol.rtol * gap
        # The value check's own words first (issue 47: a LayerNorm variance bug read as a
        # dropout problem): the output is off its nearest reference value.
        which, near = ("kept", keep) if abs(got - keep) <= abs(got - drop) else ("dropped", drop)
        return MaskInference(
            False,
            f"{n_neither} of {o_flat.numel()} elements are wrong values, outside the tolerance "
            f"of both reference values (worst at {at}: expected {near:.6g}, its {which} "
            f"value, got {got:.6g}, {abs(got - near):.3g} off): an error in the computed "
            "values, before any question of which elements are dropped; in dropout terms, "
            f"{n_neither} elements are neither a kept nor a dropped value (worst at {at}: kept "
            f"value {keep:.6g}, dropped value {drop:.6g}, got {got:.6g}; each must be within "
            f"atol + rtol·|kept − dropped| = {bound:.3g} of one, plus one unit of "
            f"{str(dtype).removeprefix('torch.')} at the value)",
            None,
            None,
        )
    return MaskInference(True, "", dropped.reshape(out.shape), decidable.reshape(out.shape), top)


def binomial_ok(
    count: int, n: int, p: float, sigmas: float, what: str = "dropped fraction"
) -> tuple[bool, str]:
    """Is `count` successes out of `n` consistent with rate p (normal approx., ±sigmas)?"""
    if n == 0:
        return (
            False,
            "no element was decidable as kept or dropped",
        )
    mean = n * p
    sd = math.sqrt(max(n * p * (1 - p), 1e-12))
    ok = abs(count - mean) <= sigmas * sd + 1
    frac = count / n
    return (
        ok,
        f"{what} {frac:.4f} over {n} elements (expected {p:g} ± {sigmas * sd / n:.4f})",
    )


def rate_problem(
    inf: MaskInference,
    ref_keep: torch.Tensor,
    ref_drop: torch.Tensor,
    p: float,
    sigmas: float,
) -> str | None:
    """Why the dropped fraction does not fit p — over every decidable element (±sigmas,
    `binomial_ok`), and within each stratum of mask_stats.strata: the sign and the size
    (quartiles) of the dropped value and of the random term, row and column blocks, the
    last row and the columns past the last multiple of 64 (a Chernoff tail below
    mask_stats.ALPHA) — or None. The strata catch a kernel whose rate depends on the data
    or the position while the overall fraction stays right (1.5p where the residual is
    negative and 0.5p elsewhere passed the earlier two-way split, issue 45). The strata's
    counts are kept on `inf.strata` (pooled across calls by the judge). None too when no
    element is decidable (the dtype rounds the kept and dropped values alike everywhere):
    the call then says nothing about the rate, and the sensitivity proof (every element
    kept must fail some call) makes sure another call does."""
    assert inf.dropped is not None and inf.decidable is not None
    dec = inf.decidable
    n = int(dec.sum().item())
    if n == 0:
        return None
    dropped = inf.dropped & dec
    ok, text = binomial_ok(int(dropped.sum().item()), n, p, sigmas)
    if not ok:
        return text
    inf.strata = strata_counts(dropped, dec, ref_keep, ref_drop)
    return strata_problem(inf.strata, p)


def neighbours_problem(inf: MaskInference, p: float, sigmas: float) -> str | None:
    """Why the masks of rows or of columns look dependent — at lags 1 to 16384 (every one
    up to 8, the powers of two, a few drawn now) and for random pairs
    (mask_stats.lags_problem) — or None. `sigmas` is unused (each test's tail is bounded by
    mask_stats.ALPHA); kept for the callers."""
    del sigmas
    assert inf.dropped is not None and inf.decidable is not None
    return lags_problem(inf.dropped, inf.decidable, p)
