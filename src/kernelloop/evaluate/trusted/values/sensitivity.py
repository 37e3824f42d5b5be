"""Proof, per evaluation, that the planned checks can tell a computed output from a trivial one.

Loose tolerances let outputs that did no work pass: for the flagship in bf16, `out ≈
residual` is within one rounding of the true output wherever |residual| ≫ softmax ≈ 1e-4
(every element but ~0.5% on random data). So the trusted side runs every trivial output
below through the same value check as the candidate's, call by call, and an evaluation
is accepted only if each of them failed at least one planned check. Which check caught
which output is recorded as a `sensitivity` CheckResult, so a reviewer sees the proof.

Trivial outputs: zeros; the best constant (the reference's mean); each input tensor
shaped like the output, passed through; for a stochastic call (p > 0), the kept value
everywhere (no dropout), so some planned check is proven to see the mask.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch

from kernelloop.evaluate.trusted.values.compare import CHUNK


class TrivialOutputs(Mapping):
    """Outputs a candidate could return without computing anything, in the output's dtype,
    by name: each made only when it is looked at. Once a check has caught one, later calls
    only need its name (Sensitivity.pending), so most calls of an evaluation make none —
    making all of them for every call cost the judge ~1 s of a flagship evaluation on the
    H200 (a full-size tensor each, and a host sync for the mean)."""

    NO_DROPOUT = "no dropout (every element kept)"

    def __init__(
        self, inputs: dict, like: torch.Tensor, ref: torch.Tensor, kept: torch.Tensor | None
    ) -> None:
        self._like, self._ref, self._kept, self._made = like, ref, kept, {}
        self._names = ["zeros"]
        if like.numel() > 1:  # a single value's own mean is the answer, not a trivial output
            self._names.append("constant")
        self._inputs = {
            f"pass-through of {name}": t
            for name, t in inputs.items()
            if isinstance(t, torch.Tensor) and t.shape == like.shape
        }
        self._names += list(self._inputs)
        if kept is not None:
            self._names.append(self.NO_DROPOUT)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._made:
            if name not in self._names:
                raise KeyError(name)
            self._made[name] = self._make(name)
        return self._made[name]

    def _make(self, name: str) -> torch.Tensor:
        like = self._like
        if name == "zeros":
            return torch.zeros_like(like)
        if name == "constant":
            mean = finite_mean(self._ref)
            if like.is_floating_point():
                info = torch.finfo(like.dtype)
                mean = min(max(mean, info.min), info.max)
            elif like.dtype == torch.bool:
                mean = mean >= 0.5
            else:  # indices, counts: the nearest value the dtype holds
                info = torch.iinfo(like.dtype)
                mean = int(min(max(round(mean), info.min), info.max))
            return torch.full_like(like, mean)
        if name == self.NO_DROPOUT:
            return self._kept.to(like.dtype)
        return self._inputs[name].to(like.dtype)


def finite_mean(ref: torch.Tensor) -> float:
    """The mean of `ref`'s finite values (0.0 if none), in float64, CHUNK elements at a
    time: a boolean index of the whole tensor made int64 indices, 16 bytes per element of a
    2-d tensor (24 GiB for KernelBench level1/19's 4096x393216 output on the H200,
    2026-12-02, which ran the trusted side out of memory)."""
    flat = ref.reshape(-1)
    total = torch.zeros((), dtype=torch.float64, device=ref.device)
    count = torch.zeros((), dtype=torch.int64, device=ref.device)
    for lo in range(0, flat.numel(), CHUNK):
        part = flat[lo : lo + CHUNK].to(torch.float64)
        ok = torch.isfinite(part)
        total += torch.where(ok, part, 0.0).sum()
        count += ok.sum()
    n = int(count.item())
    return float(total.item()) / n if n else 0.0


def trivial_outputs(
    inputs: dict, like: torch.Tensor, ref: torch.Tensor, kept: torch.Tensor | None = None
) -> TrivialOutputs:
    """Outputs a candidate could return without computing anything (TrivialOutputs);
    `kept`: a stochastic call's every-element-kept reference."""
    return TrivialOutputs(inputs, like, ref, kept)


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
