"""Proof, per evaluation, that the planned checks can tell a computed output from a trivial one.

Loose tolerances let outputs that did no work pass: for the flagship in bf16, `out ≈
residual` is within one rounding of the true output wherever |residual| ≫ softmax ≈ 1e-4
(every element but ~0.5% on random data). So the trusted side runs every trivial output
below through the same value check as the candidate's, call by call, and an evaluation
is accepted only if each of them failed at least one planned check. Which check caught
which output is recorded as a `sensitivity` CheckResult, so a reviewer sees the proof.

Trivial outputs: zeros; the best constant (the reference's mean); each input tensor
shaped like the output, passed through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def trivial_outputs(inputs: dict, like: torch.Tensor, ref: torch.Tensor) -> dict[str, torch.Tensor]:
    """Outputs a candidate could return without computing anything, in the output's dtype."""
    outs = {"zeros": torch.zeros_like(like)}
    finite = ref[torch.isfinite(ref)].to(torch.float64)
    mean = float(finite.mean().item()) if finite.numel() else 0.0
    if like.is_floating_point():
        info = torch.finfo(like.dtype)
        mean = min(max(mean, info.min), info.max)
    elif like.dtype == torch.bool:
        mean = mean >= 0.5
    else:  # indices, counts: the nearest value the dtype holds
        info = torch.iinfo(like.dtype)
        mean = int(min(max(round(mean), info.min), info.max))
    if like.numel() > 1:  # a single value's own mean is the answer, not a trivial output
        outs["constant"] = torch.full_like(like, mean)
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor) and t.shape == like.shape:
            outs[f"pass-through of {name}"] = t.to(like.dtype)
    return outs


def matching_trivial(out: torch.Tensor, trivial: dict[str, torch.Tensor], close) -> str | None:
    """The trivial output `out` is indistinguishable from, if any (`close(a, b)` decides)."""
    for name, t in trivial.items():
        if t.shape == out.shape and (torch.equal(out, t) or close(out, t)):
            return name
    return None


@dataclass
class Sensitivity:
    """Which trivial outputs some planned check has already caught, and where."""

    caught: dict[str, str] = field(default_factory=dict)  # name -> "suite/case shape dtype"
    seen: set[str] = field(default_factory=set)

    def pending(self, names) -> list[str]:
        self.seen.update(names)
        return [n for n in names if n not in self.caught]

    def mark(self, name: str, where: str) -> None:
        self.caught.setdefault(name, where)

    def uncaught(self) -> list[str]:
        return sorted(self.seen - set(self.caught))
