"""Shapes a user names on the command line: the task's own by label, or ad-hoc ones.

An engineer probes a code path the declared shapes miss (a second tile, chunked rows) with
`--shapes 3x40000` (sizes in the task's dim order) or `--shapes rows=3,cols=40000`. Such a
shape is judged like any other (weight 1 among the shapes asked for) but tagged `ad_hoc`,
so the records say it was not one of the task's, and it gets a roofline floor only where the
task's floor expressions depend on its dims (an imported KernelBench task's floor is a
constant of the problem's own size, which an ad-hoc shape does not have).
"""

from __future__ import annotations

import re

from kernelloop.errors import TaskError
from kernelloop.task.load import Task
from kernelloop.task.spec import Shape

AD_HOC = "ad_hoc"
_SIZES = re.compile(r"^\d+(x\d+)*$")


def shapes_from(task: Task, selection: str) -> list[Shape]:
    """Comma-separated labels (`16384x8192`), ad-hoc sizes (`3x40000`) and `dim=N` groups
    (`rows=3,cols=40000`; a new group starts where a dim repeats) as shapes, in order."""
    out: list[Shape] = []
    group: dict[str, int] = {}
    for raw in selection.split(","):
        item = raw.strip()
        if "=" in item:
            key, _, value = (p.strip() for p in item.partition("="))
            if key in group:
                out.append(_named(task, group))
                group = {}
            group[key] = _size(value, item)
            continue
        if group:
            out.append(_named(task, group))
            group = {}
        out.append(_labelled(task, item))
    if group:
        out.append(_named(task, group))
    return out


def _labelled(task: Task, label: str) -> Shape:
    for s in [*task.spec.shapes, *task.spec.cpu_shapes]:
        if s.label == label:
            return s
    names = _dim_names(task)
    if not _SIZES.match(label):
        known = ", ".join(s.label for s in [*task.spec.shapes, *task.spec.cpu_shapes])
        raise TaskError(
            f"shape {label!r} is neither one of the task's ({known}) nor sizes like "
            f"{'x'.join('N' for _ in names)} in the order {'x'.join(names)}; pass one of those."
        )
    sizes = [int(n) for n in label.split("x")]
    if len(sizes) != len(names):
        raise TaskError(
            f"shape {label!r} gives {len(sizes)} size(s) but the task has {len(names)} dims "
            f"({'x'.join(names)}); give one size per dim, e.g. "
            f"{'x'.join(str(v) for v in task.spec.cpu_shapes[0].dims.values())}."
        )
    return _ad_hoc(dict(zip(names, sizes, strict=True)))


def _named(task: Task, dims: dict[str, int]) -> Shape:
    names = _dim_names(task)
    unknown = [k for k in dims if k not in names]
    missing = [k for k in names if k not in dims]
    if unknown or missing:
        what = f"unknown dim(s) {unknown}" if unknown else f"missing dim(s) {missing}"
        raise TaskError(
            f"shape {','.join(f'{k}={v}' for k, v in dims.items())}: {what}; name every dim "
            f"of the task once: {','.join(f'{k}=N' for k in names)}."
        )
    for s in [*task.spec.shapes, *task.spec.cpu_shapes]:
        if s.dims == {k: dims[k] for k in names}:
            return s
    return _ad_hoc({k: dims[k] for k in names})


def _size(value: str, item: str) -> int:
    if not value.isdigit() or int(value) <= 0:
        raise TaskError(f"shape {item!r}: a size must be a positive integer.")
    return int(value)


def _ad_hoc(dims: dict[str, int]) -> Shape:
    return Shape(dims=dims, weight=1.0, tag=AD_HOC)


def _dim_names(task: Task) -> list[str]:
    return list(task.spec.cpu_shapes[0].dims)


def floor_depends_on_dims(task: Task) -> bool:
    """Whether the task's roofline expressions name any of its dims (else they are
    constants of one size, and an ad-hoc shape has no floor)."""
    names = set(_dim_names(task))
    rl = task.spec.roofline
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f"{rl.bytes} {rl.flops}"))
    return bool(words & names)
