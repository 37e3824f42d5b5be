"""The seeds and rates of an evaluation's randomness checks, drawn from the values people
pass (issue 45): seeds small (0, 1, 42, …), a step counter, 31-, 32- and 63-bit; the other
seed of a pair a relative of the first (+1, -1, one bit flipped, +2^16) or a fresh one;
rates drawn over [RATE_LOW, rate_top) every evaluation, always with 0.1, 0.2, 0.3, one drawn
in [0.1, 0.5), the task's rate and its `[stochastic] rates`; rate_top is 0.95, or up to 0.999
where the judged shapes still keep KEPT_MIN elements at it (GPU shapes: p = 0.99 is real use
too). Every draw comes from the evaluation's secret `Seeds` (plan.py): no fixed list a
kernel could recognise.

A kernel that skipped dropout for small seeds, used only a seed's low 16 bits, or keyed its
generator on seed + row was accepted while every seed was a uniform 31-bit number and the
masks of related seeds were never compared; one with half the rate for 0.12 < p < 0.48
while only 0.1, 0.5 and a rate above them were judged (2026-12-07).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelloop.task import Shape, Task

FAMILIES = ("small", "counter", "u31", "u32", "u63")
COMMON_SEEDS = (0, 1, 2, 3, 7, 42, 123, 1234, 1337, 2024, 12345, 31337)
RELATIONS = ("seed + 1", "seed - 1", "one bit flipped", "seed + 2^16", "an unrelated seed")
COMMON_RATES = (0.1, 0.2, 0.3)
RATE_TOP = 0.95  # dropout past this keeps too few elements of a CPU shape to judge a mask
RATE_CAP = 0.999  # the highest rate drawn, on shapes large enough (rate_top)
KEPT_MIN = 10_000  # elements a shape keeps, in expectation, at the highest rate drawn for it
RATE_LOW = 0.01  # below this too few are dropped on a CPU shape for the rate's bound


def user_seed(v: int, family: str | None = None) -> int:
    """A seed as people pass it, from 63 random bits `v`; the family from `v` too unless
    given: small (a common value, or below 1000), a step counter (below 2^17), uniform
    31-bit, 32-bit (2^31 and up) or 63-bit."""
    fam = family or FAMILIES[(v >> 40) % len(FAMILIES)]
    low = v & ((1 << 40) - 1)
    if fam == "small":
        return COMMON_SEEDS[low % len(COMMON_SEEDS)] if (v >> 50) & 1 else low % 1000
    if fam == "counter":
        return low % (1 << 17)
    if fam == "u31":
        return low % (1 << 31)
    if fam == "u32":
        return (1 << 31) + low % (1 << 31)
    return v % (1 << 63)


def related_seed(s: int, relation: str, v: int) -> int:
    """A seed related to `s` by `relation` (one of RELATIONS; `v`: random bits for the bit
    and the fresh seed), never `s` itself and always in [0, 2^63)."""
    top = 1 << 63
    if relation == "seed + 1":
        return s + 1 if s + 1 < top else s - 1
    if relation == "seed - 1":
        return s - 1 if s > 0 else s + 1
    if relation == "one bit flipped":
        return s ^ (1 << (v % max(s.bit_length() + 1, 17) % 63))
    if relation == "seed + 2^16":
        return s + (1 << 16) if s + (1 << 16) < top else s - (1 << 16)
    fresh = user_seed(v)
    return fresh if fresh != s else s + 1


@dataclass
class Group:
    rate: float
    seed: int
    other: int
    relation: str


def rate_top(numel: int) -> float:
    """The highest rate drawn for a shape of `numel` elements: RATE_TOP, or up to RATE_CAP
    where the shape still keeps KEPT_MIN elements in expectation (the mask tests' false
    alarms are bounded at any count, mask_stats.py; their power is what needs elements)."""
    return min(RATE_CAP, max(RATE_TOP, 1.0 - KEPT_MIN / max(numel, 1)))


def stochastic_rates(task: Task, seeds, used: float, top: float = RATE_TOP) -> list[float]:
    """The rates every evaluation judges: the task's `[stochastic] rates` (always included),
    its used rate, COMMON_RATES, one drawn in [0.1, 0.5) and one drawn above all of them
    up to `top` (`kernelloop gate-check` found a flagship kernel wrong only above
    p = 0.5, its largest declared rate, 2026-12-03)."""
    st = task.spec.stochastic
    assert st is not None
    rng = seeds.rng("stochastic-rates")
    fixed = [*st.rates, used, *COMMON_RATES]
    drawn = [rng.uniform(0.1, 0.5)]  # unrounded: no grid a kernel could key on
    low = max(fixed) + 0.05
    if low < top:
        drawn.append(rng.uniform(low, top))
    want = [*fixed, *drawn]
    return sorted({r for r in want if 0 < r < 1})


def stochastic_groups(task: Task, slots: list[tuple[Shape, str, bool]], seeds, used: float):
    """(shape, dtype, index, Group) of the stochastic suite: every slot (shape, dtype, large)
    gets one group; the first shape's slots (when not large) share out the rest of the
    required rates (stochastic_rates), so each required rate is judged once and the other
    slots get a rate drawn (a common one or one over [RATE_LOW, rate_top), unrounded). The
    rate drawn above the others goes up to the smallest slot's rate_top (wherever it lands).
    Seeds: each group's family and its other seed's relation rotate through FAMILIES and
    RELATIONS in a secret order, so every evaluation with five groups or more meets each."""
    rng = seeds.rng("stochastic-groups")
    top = rate_top(min((sl[0].numel for sl in slots), default=1))
    required = stochastic_rates(task, seeds, used, top)
    first = [sl for sl in slots if sl[0].label == slots[0][0].label] if slots else []
    per = math.ceil(len(required) / max(len(first), 1))
    if first and first[0][2]:
        per = 1  # a large first shape: one group per slot, the rest go round the others
    picks: list[tuple[Shape, str]] = []
    for shape, dtype, _ in slots:
        n = per if (shape, dtype) in [(s, d) for s, d, _ in first] else 1
        picks += [(shape, dtype)] * n
    while len(picks) < len(required):  # fewer slots than rates: more on the first one
        picks.append((slots[0][0], slots[0][1]))
    order = list(range(len(picks)))
    rng.shuffle(order)
    rates = [0.0] * len(picks)
    for k, pos in enumerate(order):
        if k < len(required):
            rates[pos] = required[k]
        elif rng.random() < 0.5:
            rates[pos] = rng.choice([*COMMON_RATES, used])
        else:
            # unrounded: no grid a kernel could key on
            rates[pos] = rng.uniform(RATE_LOW, rate_top(picks[pos][0].numel))
    fams, rels = list(FAMILIES), list(RELATIONS)
    rng.shuffle(fams)
    rng.shuffle(rels)
    seen: dict[tuple[str, str], int] = {}
    out = []
    for g, ((shape, dtype), rate) in enumerate(zip(picks, rates, strict=True)):
        j = seen[(shape.label, dtype)] = seen.get((shape.label, dtype), -1) + 1
        name = f"{shape.label}-{dtype}-stochastic-{j}"
        s = seeds.call_seed(f"{name}/1", fams[g % len(fams)])
        rel = rels[g % len(rels)]
        other = related_seed(s, rel, rng.getrandbits(63))
        out.append((shape, dtype, j, Group(rate, s, other, rel)))
    return out
