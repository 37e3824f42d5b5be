"""The declared real-use domain of a task's scalar parameters (task/domain.py, issue 45):
validated on load, drawn by one sampler per evaluation, in strata that put a bound or a
range draw among any two calls of a case, and used by the plan on every call but e2e and
`[suites] at_params` cases."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls
from kernelloop.task import load_task
from kernelloop.task.domain import ParamDomain, Sampler, draw
from tests.conftest import ROOT

FLAGSHIP = ROOT / "examples" / "ln_softmax_dropout"


def _rngs(seed: int = 0):
    return lambda label: random.Random(f"{seed}:{label}")


def test_draws_cover_listed_values_bounds_and_decades():
    d = ParamDomain(low=1e-12, high=1e-2, scale="log", values=[1e-5, 1e-6])
    rng = random.Random(7)
    got = [draw(d, 1e-5, rng) for _ in range(600)]
    assert all(1e-12 <= v <= 1e-2 for v in got)
    assert {1e-5, 1e-6, 1e-12, 1e-2} <= set(got)
    decades = {int(-__import__("math").log10(v)) for v in got}
    assert len(decades) >= 9  # log-uniform: every decade of the range is reached


def test_any_two_calls_of_a_stratum_include_a_bound_or_a_range_draw():
    d = {"eps": ParamDomain(low=1e-12, high=1e-2, scale="log", values=[1e-5])}
    for seed in range(200):
        s = Sampler(d, {"eps": 1e-5}, _rngs(seed))
        a, b = s.params("a", "extreme:x")["eps"], s.params("b", "extreme:x")["eps"]
        assert a != 1e-5 or b != 1e-5, seed


def test_a_group_shares_its_draw_and_strata_are_independent():
    d = {"eps": ParamDomain(low=1e-12, high=1e-2, scale="log")}
    s = Sampler(d, {"eps": 1e-5}, _rngs())
    first = s.params("grp", "random")
    assert s.params("grp", "random") == first
    assert Sampler({}, {}, _rngs()).params("x") == {}


@pytest.mark.parametrize(
    "domain, message",
    [
        ('eps = { low = 1e-2, high = 1e-12, scale = "log" }', "must not exceed"),
        ('eps = { low = 0.0, high = 1e-2, scale = "log" }', "needs low > 0"),
        ("eps = { low = 1e-9, high = 1e-2, values = [1.0] }", "outside"),
        ("eps = { low = 1e-3, high = 1e-2 }", "lies outside its [domain]"),
        ("eps2 = { low = 1e-9, high = 1e-2 }", "names no numeric [params] value"),
        ("p = { low = 0.0, high = 0.9 }", "drawn by kernelloop itself"),
    ],
)
def test_a_wrong_domain_is_refused_with_the_fix(tmp_path: Path, domain: str, message: str):
    folder = tmp_path / "t"
    shutil.copytree(FLAGSHIP, folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    start = text.index("[domain]\n")
    end = text.index("\n", start + len("[domain]\n"))
    toml.write_text(text[:start] + "[domain]\n" + domain + text[end:])
    with pytest.raises(KernelloopError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_task(folder)


def test_the_plan_draws_eps_on_judged_calls_and_keeps_the_tasks_own_where_declared():
    task = load_task(FLAGSHIP)
    shapes = task.spec.cpu_shapes
    seen: set[float] = set()
    for k in range(5):
        plan = plan_calls(task, shapes, ["float32"], seeds=Seeds(bytes([k]) * 32))
        for c in plan.calls:
            eps = c.params.get("eps")
            if c.suite == "e2e" or c.case == "constant_rows":
                assert eps is None, c.id  # the task's [params] eps applies
                continue
            assert eps is not None and 1e-12 <= eps <= 1e-2, c.id
            seen.add(eps)
        groups: dict[str, set] = {}
        for c in plan.calls:
            if c.group:
                groups.setdefault(c.group, set()).add(c.params.get("eps"))
        assert all(len(v) == 1 for v in groups.values())  # a group is judged on one eps
        small = [c.params["eps"] for c in plan.calls if c.case == "small_variance"]
        assert any(e not in (1e-5,) for e in small)
    assert len(seen) > 10
