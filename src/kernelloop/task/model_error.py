"""The task's own model's error: a bound no honest kernel is asked to beat (issue 33, "No
false rejections"). Pure tensor arithmetic, used by the judge (evaluate/trusted/values/own_error.py,
judge_e2e.py) and by the KernelBench importer (kernelbench_cases.py).

A tolerance with `model_margin` (task.toml: `{ atol = …, rtol = …, model_margin = M }`)
is widened per call: the trusted side runs the task's reference a second time, on the
call's inputs as drawn in the judged dtype (no upcast) — PyTorch's own model in that
dtype, here, on the judging device, at the judged size — and measures how much of the
tolerance it uses against the float64 reference, q = max |own − ref| / (atol + rtol·|ref|).
The candidate is then held to max(1, M·q) times the tolerance. Where the task's own model
meets its tolerance with room (q ≤ 1/M) nothing changes; where it misses (q > 1), that
miss is the task's, and a candidate is asked only to stay within M times what PyTorch
itself does on the same inputs. So the baseline of an imported KernelBench problem (that
same model) passes by construction, on every device and size, and a kernel that is
wrong by more than M times PyTorch's own rounding is still rejected.

Why it is measured at evaluation time, not at import: KernelBench level1/97 (fp32
attention) meets 1e-2 on the importer's tiny CPU shapes and misses it on its x100 case at
the GPU size, by the same amount for torch's own attention as for honest kernels (issue
33, finding 5); a measurement anywhere else than where the judging happens sizes the bound
for the wrong numbers. benchmarks/e2e_errors.py and benchmarks/own_error_attention.py
measure the margin (results under benchmarks/results/).
"""

from __future__ import annotations

import math

import torch

from kernelloop.task.spec import Tolerance

CHUNK = 1 << 24  # elements at a time, as compare.py: float64 temporaries stay small


def as_judged(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`ref` (float64) with every finite value beyond `dtype`'s range replaced by that
    dtype's infinity: the right answer there, which every comparison holds an output to
    (KernelBench level1/90's cumprod of x100 inputs in float32)."""
    if not dtype.is_floating_point or torch.finfo(dtype).bits >= 64:
        return ref
    rounded = ref.to(dtype)
    return torch.where(torch.isfinite(ref) & torch.isinf(rounded), rounded.to(ref.dtype), ref)


def used(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> float:
    """How many times its tolerance `out` uses against `ref`: max |out − ref| / (atol +
    rtol·|ref|), compared as compare.within_tolerance compares (a reference beyond the
    dtype's range is its infinity; where the reference is not finite the output must equal
    it). inf where `out` is non-finite and the reference finite, or the shapes differ; 0 for
    a non-floating output (compared exactly elsewhere)."""
    if out.shape != ref.shape:
        return math.inf
    if not (out.is_floating_point() and ref.is_floating_point()):
        return 0.0
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    worst = 0.0
    for lo in range(0, o_flat.numel(), CHUNK):
        o = o_flat[lo : lo + CHUNK].to(torch.float64)
        r = as_judged(r_flat[lo : lo + CHUNK].to(torch.float64), out.dtype)
        finite = torch.isfinite(r)
        if bool((finite & ~torch.isfinite(o)).any()):
            return math.inf
        if bool((~finite & (o != r) & ~(torch.isnan(o) & torch.isnan(r))).any()):
            return math.inf
        err = torch.where(finite, (o - r).abs(), torch.zeros((), dtype=o.dtype, device=o.device))
        q = err / (tol.atol + tol.rtol * torch.where(finite, r.abs(), 0.0)).clamp_min(1e-300)
        if q.numel():
            worst = max(worst, float(q.max().item()))
    return worst


def factor(tol: Tolerance, own_used: float) -> float:
    """What the tolerance is multiplied by: max(1, model_margin × own_used); 1 without a
    margin or where the model's error could not be measured (NaN)."""
    if tol.model_margin is None or math.isnan(own_used):
        return 1.0
    return max(1.0, tol.model_margin * own_used)


def widened(tol: Tolerance, f: float) -> Tolerance:
    return tol if f == 1.0 else tol.model_copy(update={"atol": tol.atol * f, "rtol": tol.rtol * f})


def note(dtype: str, tol: Tolerance, own_used: float, f: float) -> str:
    """The words on a widened check (pass or fail): the task's fault, and the bound."""
    if f == 1.0:
        return ""
    miss = "misses" if own_used > 1.0 else "uses"
    return (
        f" [the task's own model in {dtype} (its reference run in that dtype, here) {miss} "
        f"its tolerance atol {tol.atol:g}, rtol {tol.rtol:g} by {own_used:.3g}x on these "
        f"inputs — the task's doing, not the candidate's — so the candidate is held to "
        f"{tol.model_margin:g}x that model's error: atol {tol.atol * f:.3g}, rtol "
        f"{tol.rtol * f:.3g}]"
    )


def model_used(own, refs: list[torch.Tensor], tol: Tolerance) -> float:
    """`used` over every output of the model's own run `own` (a tensor or a tuple) against
    the float64 references `refs`; NaN where their counts differ (nothing is widened)."""
    outs = list(own) if isinstance(own, tuple | list) else [own]
    if len(outs) != len(refs) or not all(isinstance(o, torch.Tensor) for o in outs):
        return math.nan
    return max((used(o, r, tol) for o, r in zip(outs, refs, strict=True)), default=0.0)


def margin_words(tols: list, model: str) -> str:
    """What `model_margin` means for the agent (task/model_error.py), "" without one."""
    margins = sorted({t.model_margin for t in tols if t.model_margin is not None})
    if not margins:
        return ""
    m = "/".join(f"{x:g}" for x in margins)
    return (
        f" Where {model} in the judged dtype misses it on the same inputs, the bound is "
        f"{m}x that error."
    )
