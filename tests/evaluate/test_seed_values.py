"""The stochastic suite's seeds and rates (values/seed_values.py), drawn per evaluation from
the secret `Seeds`: every plan judges the common rates (0.1, 0.2, 0.3), one drawn in
[0.1, 0.5) and its declared ones, seeds of every family people pass (small, a step counter,
31/32/63-bit) and other seeds related by +1 and by 2^16 — on the CPU shapes, a single
test shape and the GPU shapes — while no two evaluations draw the same values."""

import pytest

from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls
from kernelloop.evaluate.trusted.values.seed_values import (
    FAMILIES,
    KEPT_MIN,
    RATE_CAP,
    RATE_LOW,
    RATE_TOP,
    RELATIONS,
    related_seed,
    user_seed,
)


def _selections(task):
    cpu = task.spec.cpu_shapes
    return {
        "cpu": (cpu, task.spec.dtypes),
        "one small shape": ([s for s in cpu if s.label == "7x129"], ["float32"]),
        "declared": (task.spec.shapes, task.spec.dtypes),
    }


@pytest.mark.parametrize("which", ["cpu", "one small shape", "declared"])
def test_every_plan_judges_the_common_rates_and_the_seeds_people_pass(flagship, which):
    shapes, dtypes = _selections(flagship)[which]
    seen_rates, seen_seeds = set(), set()
    for k in range(20):
        plan = plan_calls(flagship, shapes, dtypes, seeds=Seeds(bytes([k]) * 32))
        groups = [c for c in plan.calls if c.suite == "stochastic" and c.role == "a"]
        rates = {c.rate for c in groups}
        assert {0.1, 0.2, 0.3, 0.5} <= rates
        assert any(0.1 <= r < 0.5 and r not in (0.1, 0.2, 0.3) for r in rates), rates
        assert any(r > 0.55 for r in rates), rates  # above every declared rate
        others = {
            c.group: c for c in plan.calls if c.suite == "stochastic" and c.role == "other_seed"
        }
        assert {"seed + 1", "seed + 2^16"} <= {c.relation for c in others.values()}
        firsts = [c.params["seed"] for c in groups]
        assert any(s < 1 << 17 for s in firsts), firsts  # a small seed or a step counter
        assert any(s >= 1 << 32 for s in firsts), firsts  # a 63-bit one
        for c in groups:
            o = others[c.group]
            assert o.params["seed"] != c.params["seed"] and 0 <= o.params["seed"] < 1 << 63
            same = next(x for x in plan.calls if x.group == c.group and x.role == "same_seed")
            assert same.params == c.params and o.input_seed == c.input_seed
        seen_rates |= rates
        seen_seeds |= set(firsts)
    assert len(seen_rates) > 30 and len(seen_seeds) > 60  # drawn, not a fixed list
    # Drawn rates are unrounded (no 0.001 grid a kernel could key on) and in the domain.
    drawn = seen_rates - {0.1, 0.2, 0.3, 0.5}
    smallest = min(s.numel for s in shapes)
    top = max(RATE_TOP, min(RATE_CAP, 1 - KEPT_MIN / smallest))
    assert all(RATE_LOW <= r < top for r in drawn), sorted(drawn)
    assert any(round(r, 3) != r for r in drawn), sorted(drawn)
    # Rates above 0.95 are real use too (issue 45: "rates over [0, 1)"): drawn where every
    # judged shape still keeps KEPT_MIN elements at them (the GPU shapes), never on a CPU
    # shape that would keep a few dozen.
    if smallest * (1 - 0.96) >= KEPT_MIN:
        assert any(r > 0.96 for r in drawn), sorted(drawn)
    else:
        assert all(r < RATE_TOP for r in drawn), sorted(drawn)


def test_seed_families_and_relations():
    import random

    rng = random.Random(5)
    for fam in FAMILIES:
        vals = [user_seed(rng.getrandbits(63), fam) for _ in range(200)]
        assert all(0 <= v < 1 << 63 for v in vals)
        if fam in ("small", "counter"):
            assert max(vals) < 1 << 17
        if fam == "u63":
            assert max(vals) >= 1 << 40
    for s in (0, 1, 42, 65535, 2**31 - 1, 2**63 - 1):
        for rel in RELATIONS:
            r = related_seed(s, rel, rng.getrandbits(63))
            assert r != s and 0 <= r < 1 << 63
        assert related_seed(s, "seed + 1", 0) == (s + 1 if s < 2**63 - 1 else s - 1)
        assert abs(related_seed(s, "seed + 2^16", 0) - s) == 1 << 16
        assert bin(related_seed(s, "one bit flipped", 7) ^ s).count("1") == 1
