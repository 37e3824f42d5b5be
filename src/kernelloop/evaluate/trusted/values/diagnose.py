"""What a wrong output is instead: reasons a user acts on (issue 14), added to a failed value
check's reason on the trusted side. Computed only after a check has failed, from the
trusted reference alone; they never change a verdict.

- `swapped`: an output of a tuple that is wrong in its place but within tolerance of
  another output's reference — returned twice, or the outputs swapped.
- `ignored_input`: an output that matches the reference computed with one input (a weight,
  a bias, a residual) replaced by all ones or all zeros — the kernel does not use it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# Inputs tried per diagnosis (the reference runs twice per input): a task with more
# floating-point inputs is diagnosed on its first ones only.
MAX_INPUTS = 8


def swapped(outs: list[torch.Tensor], parts: list[torch.Tensor], k: int, close: Callable) -> str:
    """'; outputs k and j are swapped…' or '; it matches the reference's output j instead'
    when output `k` is within tolerance (`close(out, ref)`) of reference j of its shape and
    dtype; '' otherwise."""
    for j in range(len(parts)):
        if j == k or outs[j].dtype != outs[k].dtype or not close(outs[k], parts[j]):
            continue
        if close(outs[j], parts[k]):
            return f"; outputs {k} and {j} are swapped: returned in the wrong order"
        return f"; it matches the reference's output {j} instead"
    return ""


def ignored_input(inputs: dict, out: torch.Tensor, reference: Callable, close: Callable) -> str:
    """'; it matches the reference with every element of `name` = v…' for the first
    floating-point input that, set to all ones or all zeros, gives the reference (called as
    `reference(inputs)`, one output) that `out` is within tolerance of; '' otherwise."""
    names = [
        n
        for n, t in inputs.items()
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1
    ]
    for name in names[:MAX_INPUTS]:
        for value in (1.0, 0.0):
            t = inputs[name]
            if bool((t == value).all()):
                continue  # already that value: the reference itself, not a diagnosis
            try:
                ref = reference({**inputs, name: torch.full_like(t, value)})
            except Exception:  # noqa: BLE001 - a reference undefined there says nothing
                continue
            if isinstance(ref, torch.Tensor) and ref.shape == out.shape and close(out, ref):
                return (
                    f"; it matches the reference computed with every element of {name} = "
                    f"{value:g}: does the kernel read {name}?"
                )
    return ""
