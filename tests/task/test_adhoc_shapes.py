"""`--shapes 3x40000` / `rows=3,cols=40000`: shapes the task does not declare, judged and
tagged ad hoc; bad ones refused in one sentence naming the fix (issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.errors import TaskError
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.adhoc import AD_HOC, shapes_from
from kernelloop.task.kernelbench import import_problem
from kernelloop.task.roofline import floor_on

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = ROOT / "examples" / "ln_softmax_dropout"
KB = Path(__file__).parent / "fixtures" / "kernelbench"


def test_labels_sizes_and_named_dims_all_parse_and_ad_hoc_ones_are_tagged():
    task = load_task(FLAGSHIP)
    declared = task.spec.shapes[0]
    got = shapes_from(task, f"{declared.label}, 3x40000,cols=7,rows=5, rows=9,cols=11")
    assert got[0] is declared
    assert [s.dims for s in got[1:]] == [
        {"rows": 3, "cols": 40000},
        {"rows": 5, "cols": 7},
        {"rows": 9, "cols": 11},
    ]
    assert all(s.tag == AD_HOC for s in got[1:])
    # named dims that spell a declared shape are that shape, weight and tag included
    cpu = task.spec.cpu_shapes[0]
    assert shapes_from(task, ",".join(f"{k}={v}" for k, v in cpu.dims.items()))[0] is cpu
    # the flagship's floor is an expression of its dims, so an ad-hoc shape has one
    floor = floor_on(task, got[1], "bfloat16", "NVIDIA H200")
    assert floor is not None and floor.memory_ms > 0


@pytest.mark.parametrize(
    ("selection", "says"),
    [
        ("3x4x5", "gives 3 size(s) but the task has 2 dims (rowsxcols)"),
        ("big", "neither one of the task's"),
        ("rows=3", "missing dim(s) ['cols']"),
        ("rows=3,cols=4,depth=2", "unknown dim(s) ['depth']"),
        ("rows=0,cols=4", "a size must be a positive integer"),
    ],
)
def test_a_bad_shape_is_one_sentence_with_the_fix(selection, says):
    with pytest.raises(TaskError) as e:
        shapes_from(load_task(FLAGSHIP), selection)
    assert says in str(e.value) and str(e.value).count("\n") == 0


def test_an_imported_problem_has_no_floor_at_an_ad_hoc_shape(tmp_path):
    """Its floor is a constant of the problem's own size: quoting it for another shape
    would make an honest kernel look impossibly fast or slow."""
    task = load_task(import_problem(KB / "level1" / "19_ReLU.py", tmp_path, ["float32"]))
    own = task.spec.shapes[0]
    assert floor_on(task, own, "float32", "NVIDIA H200") is not None
    (odd,) = shapes_from(task, "x".join(str(v + 1) for v in own.dims.values()))
    assert odd.tag == AD_HOC and floor_on(task, odd, "float32", "NVIDIA H200") is None


def test_an_ad_hoc_shape_is_judged_on_the_cpu():
    task = load_task(FLAGSHIP)
    rec = evaluate(
        task,
        FLAGSHIP / "baseline.py",
        device="cpu",
        timing=False,
        shapes="rows=3,cols=1031",
        dtypes=["float32"],
    )
    assert rec.verdict.accepted, rec.verdict.reasons
    assert any(c.shape == "3x1031" for c in rec.checks), {c.shape for c in rec.checks}
