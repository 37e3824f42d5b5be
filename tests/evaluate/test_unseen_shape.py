"""The unseen shape drawn per evaluation (class 6 of tests/cheats): no dimension may take a
value that a listed shape has, or a candidate that special-cases the listed widths passes
on it. Before this rule, half the draws on the flagship's CPU shapes reused a listed rows
or cols value, and CI saw `tested_shapes_only.py` accepted."""

from kernelloop.evaluate.trusted.plan import unseen_shape
from kernelloop.evaluate.trusted.run import select_shapes
from kernelloop.task.load import Task
from kernelloop.task.spec import Shape


def test_no_drawn_dimension_takes_a_listed_value(flagship):
    every = [*flagship.spec.shapes, *flagship.spec.cpu_shapes]
    listed = {n: {s.dims[n] for s in every} for n in every[0].dims}
    for device in ("cpu", "cuda"):
        selected = select_shapes(flagship, device, None)
        budget = max(s.dims["rows"] * s.dims["cols"] for s in selected)
        for _ in range(500):
            shape = unseen_shape(flagship, selected)
            assert shape is not None and shape.tag == "unseen"
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
