"""The undeclared shapes drawn per evaluation (evaluate/trusted/values/undeclared.py).

The wide one (class 6 of tests/cheats): no dimension may take a value that a listed shape
has, or a candidate that special-cases the listed widths passes on it. Before this rule,
half the draws on the flagship's CPU shapes reused a listed rows or cols value, and CI saw
`tested_shapes_only.py` accepted. The tile one (issue 33): every varying dimension odd, and
past one tile of 64 where its range allows, on the CPU too (every declared CPU shape of the
flagship has fewer than 64 rows). A task whose shapes are closed gets none."""

import pytest

from kernelloop.evaluate.trusted.run import select_shapes
from kernelloop.evaluate.trusted.values import undeclared
from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls, unseen_shape
from kernelloop.evaluate.trusted.values.undeclared import tile_shape, undeclared_shapes
from kernelloop.task import load_task
from kernelloop.task.load import Task
from kernelloop.task.spec import Shape
from tests.conftest import ROOT


def test_no_drawn_dimension_takes_a_listed_value(flagship):
    every = [*flagship.spec.shapes, *flagship.spec.cpu_shapes]
    listed = {n: {s.dims[n] for s in every} for n in every[0].dims}
    for device in ("cpu", "cuda"):
        selected = select_shapes(flagship, device, None)
        budget = max(s.dims["rows"] * s.dims["cols"] for s in selected)
        for _ in range(500):
            shape = unseen_shape(flagship, selected)
            assert shape is not None and shape.tag == "undeclared"
            clashes = {n: v for n, v in shape.dims.items() if v in listed[n]}
            assert not clashes, (shape.label, clashes)
            assert shape.dims["rows"] * shape.dims["cols"] <= budget


def test_where_every_value_in_range_is_listed_a_new_combination_is_drawn(flagship):
    # rows 1..2 and cols 4..5 are all listed values; 1x4 and 2x5 are the listed shapes, so
    # the only honest extra shapes are the other combinations (an even draw is kept at the top).
    shapes = [Shape(dims={"rows": 1, "cols": 4}), Shape(dims={"rows": 2, "cols": 5})]
    task = Task(
        flagship.folder, flagship.spec.model_copy(update={"shapes": shapes, "cpu_shapes": []})
    )
    drawn = [unseen_shape(task, shapes) for _ in range(200)]
    labels = {s.label for s in drawn if s is not None}
    assert labels and labels <= {"1x5", "2x4"}, labels


def _closed(task: Task) -> Task:
    info = task.spec.task.model_copy(update={"closed_shapes": True})
    return Task(task.folder, task.spec.model_copy(update={"task": info}))


@pytest.mark.parametrize("example", ["ln_softmax_dropout", "add_rmsnorm", "matmul_bias_gelu"])
def test_the_tile_shape_is_odd_and_past_one_tile_on_every_device(example):
    task = load_task(ROOT / "examples" / example)
    every = [*task.spec.shapes, *task.spec.cpu_shapes]
    names = list(every[0].dims)
    varying = [n for n in names if len({s.dims[n] for s in every}) > 1]
    listed = {n: {s.dims[n] for s in every} for n in names}
    for device in ("cpu", "cuda"):
        selected = select_shapes(task, device, None)
        # the smallest selected shape alone (a test's or a user's --shapes) still gets one
        for chosen in (selected, [min(selected, key=lambda s: undeclared.numel(s.dims))]):
            tall = set()
            for _ in range(200):
                shape = tile_shape(task, chosen)
                assert shape is not None and shape.tag == "undeclared"
                assert all(shape.dims[n] % 2 == 1 for n in varying), shape.label
                assert not any(shape.dims[n] in listed[n] for n in varying), shape.label
                tall |= {n for n in varying if shape.dims[n] > 64}
                # within the budget: at most the larger of the selected shapes' and twice
                # the smallest all-tall shape (2 x 129x129 = 33282 elements on the
                # flagship), within TILE_CAP
                assert undeclared.numel(shape.dims) <= max(
                    max(undeclared.numel(s.dims) for s in chosen), undeclared.TILE_CAP
                )
            if example != "matmul_bias_gelu":
                assert tall == set(varying), (device, tall)  # rows >= 65 too, on the CPU
            else:
                assert len(tall) >= 2, tall  # M, N, K: two of them past a tile within budget


def test_on_the_flagship_the_tile_shape_has_129_to_193_rows_on_the_cpu(flagship):
    for _ in range(200):
        shape = tile_shape(flagship, list(flagship.spec.cpu_shapes))
        rows, cols = shape.dims["rows"], shape.dims["cols"]
        # past 128 rows (issue 45: a kernel launching at most 128 programs), no multiple of
        # 8, 16, 32, 64 or 128, and few enough rows to stay cheap
        assert 128 < rows <= 193 and rows % 2 == 1 and cols % 2 == 1, shape.label
        assert rows * cols <= 2 * 129 * 129, shape.label


def test_the_plan_draws_them_from_its_seeds_and_a_closed_task_gets_none(flagship):
    shapes, dtypes = list(flagship.spec.cpu_shapes), list(flagship.spec.dtypes)
    seeds = Seeds()
    a = plan_calls(flagship, shapes, dtypes, seeds=seeds)
    b = plan_calls(flagship, shapes, dtypes, seeds=Seeds(seeds.key))
    drawn = [(c.id, c.shape.label) for c in a.calls if c.shape.tag == "undeclared"]
    assert drawn == [(c.id, c.shape.label) for c in b.calls if c.shape.tag == "undeclared"]
    # the tile shape, the wide one and two short-wide reach shapes (3x32768, 3x(16385..))
    assert len({label for _, label in drawn}) == 4
    assert undeclared.judged_on(flagship, a).startswith(
        "judged on the declared shapes and 4 undeclared shape(s)"
    )
    closed = _closed(flagship)
    assert undeclared_shapes(closed, shapes) == []
    plan = plan_calls(closed, shapes, dtypes, seeds=seeds)
    assert not [c for c in plan.calls if c.shape.tag == "undeclared"]
    assert undeclared.judged_on(closed, plan) == (
        "judged on the declared shapes only: the task declares its shapes closed"
    )
    # A shape given with --shapes that the task does not declare is named as given, never
    # called declared (issue 46 item 6: "judged on the declared shapes only").
    from kernelloop.task.adhoc import shapes_from

    given = shapes_from(closed, "9x77")
    plan = plan_calls(closed, given, dtypes, seeds=seeds)
    assert undeclared.judged_on(closed, plan) == (
        "judged on the shape given (9x77) only: the task declares its shapes closed"
    )
    both = plan_calls(closed, [*shapes[:1], *given], dtypes, seeds=seeds)
    assert undeclared.judged_on(closed, both).startswith(
        "judged on the declared shapes and the shape given (9x77) only"
    )


def test_closed_shapes_is_a_validated_task_field(tmp_path):
    import shutil

    from kernelloop.errors import KernelloopError

    folder = tmp_path / "t"
    shutil.copytree(ROOT / "examples" / "cpu_task", folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    toml.write_text(text.replace("[task]\n", "[task]\nclosed_shapes = true\n", 1))
    assert load_task(folder).spec.task.closed_shapes is True
    toml.write_text(text.replace("[task]\n", '[task]\nclosed_shapes = "yes please"\n', 1))
    with pytest.raises(KernelloopError, match="closed_shapes"):
        load_task(folder)
