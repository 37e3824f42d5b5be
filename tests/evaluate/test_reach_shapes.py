"""The reach shapes (evaluate/trusted/values/undeclared.py, issue 45 class 6): each varying
dimension judged up to its declared maximum where the budget allows, and where it does not
the verdict says how far it reached ("judged up to R×C on this machine"), never more.

Before, every CPU draw of the flagship stayed within the largest CPU shape's 16,400
elements (rows <= 125, cols <= ~4,000 of a declared [129, 32768])."""

import random

from kernelloop.evaluate.trusted.run import select_shapes
from kernelloop.evaluate.trusted.values import undeclared
from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls
from kernelloop.evaluate.trusted.values.undeclared import TILE, draws, reach_shapes
from kernelloop.task.load import Task
from kernelloop.task.spec import Shape


def test_on_the_cpu_the_flagship_reaches_32768_columns_with_few_rows(flagship):
    cpu = select_shapes(flagship, "cpu", None)
    for seed in range(200):
        drawn, reach = draws(flagship, cpu, random.Random(seed))
        dims = [s.dims for s in reach]
        assert {"rows": 3, "cols": 32768} in dims, dims  # the declared maximum, exactly
        odd = [d for d in dims if d["cols"] != 32768]
        assert len(odd) == 1 and 16384 < odd[0]["cols"] < 32768 and odd[0]["cols"] % 2, odd
        assert all(d["rows"] == 3 for d in dims)  # few rows: the interpreter's cost is per program
        tile = drawn[0].dims
        assert TILE < tile["rows"] <= 193 and tile["rows"] % 2 == 1, tile


def test_on_a_gpu_the_flagship_gets_tall_narrow_and_wide_odd_shapes(flagship):
    gpu = select_shapes(flagship, "cuda", None)
    for seed in range(100):
        reach = reach_shapes(flagship, gpu, random.Random(seed))
        tall = [s.dims for s in reach if s.dims["cols"] == 129]
        wide = [s.dims for s in reach if s.dims["rows"] == 3]
        # every declared maximum is a listed shape's there: odd values between half and it
        assert len(tall) == 1 and 32768 < tall[0]["rows"] < 65536 and tall[0]["rows"] % 2, tall
        assert len(wide) == 1 and 16384 < wide[0]["cols"] < 32768 and wide[0]["cols"] % 2, wide


def test_a_draw_the_task_refuses_is_rounded_down_to_one_it_accepts(flagship):
    cpu = select_shapes(flagship, "cpu", None)

    def accepts(dims):
        return dims["cols"] % 256 == 0

    reach = reach_shapes(flagship, cpu, random.Random(0), accepts)
    assert reach and all(s.dims["cols"] % 256 == 0 and s.dims["cols"] > 16384 for s in reach)


def test_the_verdict_says_how_far_the_cpu_reached_and_never_more(flagship):
    cpu = select_shapes(flagship, "cpu", None)
    plan = plan_calls(flagship, cpu, ["float32"], seeds=Seeds())
    rows = max(c.shape.dims["rows"] for c in plan.calls)
    assert TILE < rows < 200
    assert undeclared.reached(flagship, plan) == {"rows": (rows, 65536)}
    line = undeclared.judged_on(flagship, plan)
    assert f"judged up to {rows}×32768 (rows×cols) on this machine" in line, line
    assert "rows up to 65536 declared" in line, line
    # on a GPU every declared maximum is judged: nothing to qualify
    gpu = plan_calls(flagship, select_shapes(flagship, "cuda", None), ["bfloat16"], seeds=Seeds())
    assert undeclared.reached(flagship, gpu) == {}
    assert "judged up to" not in undeclared.judged_on(flagship, gpu)


def test_the_reach_shapes_get_one_call_each_in_the_plan(flagship):
    cpu = select_shapes(flagship, "cpu", None)
    plan = plan_calls(flagship, cpu, ["float32"], seeds=Seeds())
    wide = [c for c in plan.calls if c.shape.tag == "undeclared" and c.shape.dims["rows"] == 3]
    assert len(wide) == 2 and all(c.suite == "random" for c in wide), [c.id for c in wide]


def test_a_task_whose_maxima_fit_the_budget_reaches_them_and_no_more(flagship):
    shapes = [Shape(dims={"rows": 2, "cols": 300}), Shape(dims={"rows": 9, "cols": 1000})]
    task = Task(
        flagship.folder, flagship.spec.model_copy(update={"shapes": shapes, "cpu_shapes": []})
    )
    for seed in range(50):
        reach = reach_shapes(task, shapes, random.Random(seed))
        # 1000 columns is reached by a listed shape and below 1.5 tiles of rows: only an
        # odd width in (500, 1000) with 3 rows
        assert [s.dims["rows"] for s in reach] == [3], reach
        assert 500 < reach[0].dims["cols"] < 1000 and reach[0].dims["cols"] % 2, reach


def test_a_task_that_refuses_every_rounding_gets_no_reach_shape_and_no_error(flagship):
    """A draw rounded down to ever larger powers of two stops before it falls to the tile
    shape's reach (a width of ~250 once reached 0 at a grain of 512: a Shape with a zero
    dimension raised, on an imported KernelBench problem whose sizes must divide)."""
    shapes = [Shape(dims={"rows": 2, "cols": 129}), Shape(dims={"rows": 9, "cols": 300})]
    task = Task(
        flagship.folder, flagship.spec.model_copy(update={"shapes": shapes, "cpu_shapes": []})
    )
    for seed in range(20):
        assert reach_shapes(task, shapes, random.Random(seed), lambda dims: False) == []
