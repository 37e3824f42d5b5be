"""Generic extreme cases for tasks that list none (issue 14).

A task's own `inputs.py` knows which values break its op (the flagship's large offsets
break one-pass variance); a task that lists no `[suites] extreme` cases still gets these,
built from its `random` inputs by transforming every floating-point tensor:

- `generic_large_magnitude`: every value × S (S by dtype, below): sums and products far
  from 1, where a kernel accumulating in too narrow a type, or an unscaled exponent, fails;
- `generic_large_offset`: every value + S: mean ≫ spread, where subtracting nearly equal
  numbers (one-pass variance, naive log-sum-exp) loses the answer;
- `generic_tiny`: every value × 1e-3: results near zero, where a kernel that drops small
  terms or divides by an unguarded sum fails;
- `generic_constant`: each tensor one value throughout: zero variance, ties, equal logits;
- `generic_mixed_spikes`: random signs, and one value in a hundred S × larger: a few
  elements dominate a reduction.

S is 1e3 in float32/bfloat16/float64 and 16 in float16, whose range (65504) would turn
a product or a sum of squares of larger values into infinity in every kernel, honest ones
included. Integer and boolean tensors and Python scalars pass through unchanged.

This module runs on both sides of the trust boundary: the trusted judge and the sandboxed
worker each derive a case's inputs from the same seed, so the draws below use only the
call's generator, after the task's own `make_inputs` has drawn the `random` case from it.
It imports nothing but torch (lazily: the task's spec reads `CASES` without it). A task
whose op cannot take one of these cases (a log of its inputs, say) lists its own cases, or
`extreme = []` for none.
"""

from __future__ import annotations

CASES = (
    "generic_large_magnitude",
    "generic_large_offset",
    "generic_tiny",
    "generic_constant",
    "generic_mixed_spikes",
)
_SCALE_16 = 16.0  # float16
_SCALE = 1e3  # every other float dtype


# The cases whose values reach S: an honest kernel's absolute rounding error grows with its
# inputs' magnitude, while the output can be small (a large residual plus a normalised
# term that cancel to -0.0147: an fp32 RMSNorm was 5e-5 off, 18 of 262144 elements
# outside atol 1e-5 on the CI machine, 2026-12-01). Their absolute tolerance is the
# task's × S; the relative one stays.
SCALED = ("generic_large_magnitude", "generic_large_offset", "generic_mixed_spikes")
# An imported KernelBench problem's `large_mixed` case (kernelbench_inputs.CASES: x100 of
# any sign) by the same rule: its sums cancel to small outputs with absolute errors ~100x
# those of the problem's own inputs (level1/89's cumsum solution, a tl.cumsum in another
# order than torch's, was 4.5e-4 off an output of 0.005 against atol 1e-4, on some draws).
KERNELBENCH_SCALED = {"large_mixed": 100.0}


def atol_factor(case: str, dtype) -> float:
    """What the task's absolute tolerance is multiplied by for this case and dtype."""
    return _scale(dtype) if case in SCALED else KERNELBENCH_SCALED.get(case, 1.0)


def _scale(dtype) -> float:
    """S for this dtype."""
    import torch

    return _SCALE_16 if dtype == torch.float16 else _SCALE


def with_generic_cases(make_inputs):
    """`make_inputs` that also knows the generic cases (any other case goes to the task)."""

    def make(dims, dtype, device, generator, case="random"):
        if case not in CASES:
            return make_inputs(dims, dtype, device, generator, case)
        inputs = make_inputs(dims, dtype, device, generator, "random")
        return {k: _transform(v, case, generator) for k, v in inputs.items()}

    return make


def _transform(v, case: str, g):
    import torch

    if not isinstance(v, torch.Tensor) or not v.is_floating_point() or v.numel() == 0:
        return v
    s = _scale(v.dtype)
    x = v.to(torch.float32)
    if case == "generic_large_magnitude":
        y = x * s
    elif case == "generic_large_offset":
        y = x + s
    elif case == "generic_tiny":
        y = x * 1e-3
    elif case == "generic_constant":
        value = torch.randn((), generator=g, device=x.device, dtype=torch.float32)
        y = torch.full_like(x, float(value))
    else:  # generic_mixed_spikes
        sign = torch.randint(0, 2, x.shape, generator=g, device=x.device) * 2 - 1
        spike = torch.rand(x.shape, generator=g, device=x.device) < 0.01
        y = x.abs() * sign * torch.where(spike, s, 1.0)
    return y.to(v.dtype)
