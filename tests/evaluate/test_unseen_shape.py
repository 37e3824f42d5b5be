"""The unseen shape drawn per evaluation (class 6 of tests/cheats): no dimension may take a
value that a listed shape has, or a candidate that special-cases the listed widths passes
on it. Before this rule, half the draws on the flagship's CPU shapes reused a listed rows
or cols value, and CI saw `tested_shapes_only.py` accepted."""

from kernelloop.evaluate.plan import unseen_shape
from kernelloop.evaluate.run import select_shapes


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
