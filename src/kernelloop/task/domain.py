"""A task's declared real-use domain for its scalar parameters (`[domain]` in task.toml),
and the one sampler every evaluation draws them from.

A kernel is used with the values people pass, not only with the one a task file lists:
LayerNorm's eps is 1e-5 in one model, 1e-6 or 1e-12 in others, 1e-2 in a few. A judge
that calls the op with `[params] eps = 1e-5` every time accepts a kernel with eps hard-
coded, or with eps added outside the square root (issue 45: both accepted). So a task
declares each scalar parameter's range and the values people actually pass:

    [domain]
    eps = { low = 1e-12, high = 1e-2, scale = "log", values = [1e-5, 1e-6, 1e-12] }

and each judged call draws the parameter from it (`Sampler`): a listed value (the task's
own `[params]` value among them), a bound, or a draw over the range (log-uniform on a `log`
scale), so no value and no fixed set of values tells a judged call from a used one. The
draw comes from the evaluation's secret generator (evaluate/trusted/values/plan.Seeds), per
call (a group of calls compared with each other shares one). An extreme case that is
ill-conditioned elsewhere in the domain (a constant row at eps = 1e-12: any float32 kernel,
PyTorch's included, turns one rounding of the mean into an O(0.1) output) is listed in
`[suites] at_params` and runs at the task's own values.

The stochastic rate and seed have their own sampler beside the randomness checks; this one
serves every other declared scalar. Pure standard library: the spec reads it on load.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ParamDomain(BaseModel):
    """One scalar parameter's real-use domain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float = Field(description="the smallest value the op is used with")
    high: float = Field(description="the largest value the op is used with")
    scale: Literal["linear", "log"] = Field(
        default="linear",
        description="how values between low and high are drawn: uniformly, or uniformly in "
        "log10 (for parameters that vary over decades, like eps)",
    )
    values: list[float] = Field(
        default_factory=list,
        description="values people actually pass (each drawn as often as a random one)",
    )
    integer: bool = Field(default=False, description="the parameter takes integers only")

    @model_validator(mode="after")
    def _ordered(self) -> ParamDomain:
        if not self.low <= self.high:
            raise ValueError(f"low ({self.low:g}) must not exceed high ({self.high:g})")
        if self.scale == "log" and self.low <= 0:
            raise ValueError('a "log" scale needs low > 0; use scale = "linear"')
        out = [v for v in self.values if not self.low <= v <= self.high]
        if out:
            raise ValueError(
                f"values {out} lie outside [low, high] = [{self.low:g}, {self.high:g}]"
            )
        return self

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def check_domain(domains: dict[str, ParamDomain], params: dict, reserved: tuple) -> None:
    """Each domain names a numeric `[params]` value inside it, and none is `reserved` (the
    stochastic rate and seed, drawn by kernelloop itself); ValueError says the fix."""
    for name, d in domains.items():
        if name in reserved:
            raise ValueError(
                f"[domain] {name}: the stochastic rate and seed are drawn by kernelloop "
                "itself; remove it from [domain]"
            )
        v = params.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(
                f"[domain] {name} names no numeric [params] value; add e.g. "
                f"[params] {name} = {d.low:g}"
            )
        if not d.contains(v):
            raise ValueError(
                f"[params] {name} = {v:g} lies outside its [domain] [{d.low:g}, {d.high:g}]"
            )


# How a draw is made: a listed value (the task's own `[params]` value is one of them), a
# bound, or a value over the range. The calls of one stratum (a case: `random`, each extreme
# case) take the kinds in a shuffled cycle drawn per evaluation, so any two calls of a case
# include a bound or a range draw: a kernel right only at the listed values cannot hope that
# every call of the one case that exposes it (a row of small variance, for eps) draws one.
_KINDS = ("listed", "bound", "range")


def draw(
    domain: ParamDomain, used: float | int | None, rng: random.Random, kind: str | None = None
) -> float | int:
    """One value of the parameter for one call (module docstring); `kind`: one of _KINDS
    (default: drawn)."""
    kind = kind or rng.choice(_KINDS)
    listed = [*domain.values, *([used] if used is not None and used not in domain.values else [])]
    if kind == "listed" and listed:
        value: float = float(rng.choice(listed))
    elif kind == "bound":
        value = rng.choice((domain.low, domain.high))
    elif domain.scale == "log":
        value = 10 ** rng.uniform(math.log10(domain.low), math.log10(domain.high))
    else:
        value = rng.uniform(domain.low, domain.high)
    if domain.integer:
        return int(round(value))
    return float(f"{value:.6g}")  # a value as a person writes it, not 17 digits


class Sampler:
    """One evaluation's draws of every declared parameter: `params(name, stratum)` is the
    same for the same `name` (a group of calls compared with each other shares it), and the
    calls of a stratum cycle through the kinds of draw in an order secret to the evaluation.
    `rng(label)`: the evaluation's secret generator for a label (plan.Seeds.rng)."""

    def __init__(self, domains: dict[str, ParamDomain], params: dict, rng) -> None:
        self.domains = dict(sorted(domains.items()))
        self.used = params
        self._rng = rng
        self._memo: dict[str, dict] = {}
        self._count: dict[str, int] = {}
        self._order: dict[str, list[str]] = {}

    def params(self, name: str, stratum: str = "random") -> dict[str, float | int]:
        if not self.domains:
            return {}
        if name not in self._memo:
            if stratum not in self._order:
                order = list(_KINDS)
                self._rng(f"param-kinds:{stratum}").shuffle(order)
                self._order[stratum] = order
            k = self._count.get(stratum, 0)
            self._count[stratum] = k + 1
            kind = self._order[stratum][k % len(_KINDS)]
            rng = self._rng(f"param:{name}")
            self._memo[name] = {
                p: draw(d, self.used.get(p), rng, kind) for p, d in self.domains.items()
            }
        return dict(self._memo[name])


def describe(name: str, domain: ParamDomain) -> str:
    """The domain in words, for `task show` and an agent's brief."""
    how = "log-uniform" if domain.scale == "log" else "uniform"
    listed = f", and often {', '.join(f'{v:g}' for v in domain.values)}" if domain.values else ""
    return f"{name} over [{domain.low:g}, {domain.high:g}] ({how}{listed})"
