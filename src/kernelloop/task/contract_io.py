"""The entry's inputs and outputs as an agent's brief spells them (contract.py): run on the
CPU on the task's CPU shapes — the input generator and the reference are the task's
trusted code — and written in the task's dimension names.

A tensor's dimension is named only where one name fits it on every CPU shape: on one
shape two dims can be equal (64x64), and a name picked there would differ from the next
input's (`task show` once wrote `(rows, 64)` beside `(rows, cols)`)."""

from __future__ import annotations

import ast

from kernelloop import pyast
from kernelloop.task.load import Task

# Inputs (weights included) above which the reference is not run for the brief (float64).
MAX_ELEMS = 1 << 24
MAX_SHAPES = 4  # CPU shapes the generator runs on to name dimensions


def describe_inputs(task: Task) -> list[str]:
    """The entry's tensor arguments as the task's generator makes them: names, shapes in
    the task's dimension names, dtypes (per call dtype), contiguity, and whether each is
    passed by position or by keyword (from the baseline's signature)."""
    try:
        import torch

        make = task.load_function("inputs")
        shapes = _shapes(task)
        seen: dict[str, list[tuple[str, object]]] = {}
        sizes: dict[str, list[tuple[tuple[int, ...], dict[str, int]]]] = {}
        for shape in shapes:
            for d in task.spec.dtypes if shape is shapes[0] else task.spec.dtypes[:1]:
                g = torch.Generator(device="cpu").manual_seed(0)
                for name, v in make(shape.dims, getattr(torch, d), "cpu", g, "random").items():
                    if shape is shapes[0]:
                        seen.setdefault(name, []).append((d, v))
                    if isinstance(v, torch.Tensor) and d == task.spec.dtypes[0]:
                        sizes.setdefault(name, []).append((tuple(v.shape), shape.dims))
    except Exception as e:  # noqa: BLE001 - a description, never a reason to fail
        return [f"Inputs: (could not be described: {type(e).__name__}: {str(e)[:120]})"]
    kwonly = keyword_only(task)
    names = list(seen)
    all_kw = bool(names) and all(n in kwonly for n in names)
    if all_kw:
        head = "Tensor inputs (keyword-only: pass them by name):"
    elif any(n in kwonly for n in names):
        head = "Tensor inputs (in this order; those marked keyword-only are passed by name):"
    else:
        head = "Tensor inputs (positional, in this order):"
    lines = [head]
    for name, per in seen.items():
        mark = (
            " (keyword-only)" if name in kwonly and not head.startswith("Tensor inputs (k") else ""
        )
        lines.append(f"- {_describe_one(name, per, sizes.get(name, []))}{mark}")
    return lines


def keyword_only(task: Task) -> set[str]:
    """The baseline entry's keyword-only parameter names (after `*`)."""
    try:
        tree = pyast.parse(task.baseline_path.read_text())
    except (OSError, SyntaxError):
        return set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == task.spec.task.entry:
            return {a.arg for a in node.args.kwonlyargs}
    return set()


def _describe_one(name: str, per: list[tuple[str, object]], sizes: list) -> str:
    import torch

    first = per[0][1]
    if not isinstance(first, torch.Tensor):
        return f"`{name}`: {type(first).__name__} {first!r}"
    same = all(isinstance(v, torch.Tensor) and str(v.dtype) == f"torch.{d}" for d, v in per)
    if same:
        dtype = "the call's dtype"
    else:
        dtype = ", ".join(
            sorted({str(getattr(v, "dtype", "?")).removeprefix("torch.") for _, v in per})
        )
    contiguous = all(isinstance(v, torch.Tensor) and v.is_contiguous() for _, v in per)
    return (
        f"`{name}`: shape ({spelled(sizes)}), {dtype}, "
        f"{'contiguous' if contiguous else 'NOT always contiguous'}"
    )


def describe_outputs(task: Task) -> list[str]:
    """One line per output of the reference (a tensor, or each of a tuple's): its shape in
    the task's dimension names and its dtype as a candidate returns it (the judged dtype
    for a floating output, the reference's own otherwise); [] where the reference cannot
    be run here (a description, never a reason to fail)."""
    try:
        import torch

        make = task.load_function("inputs")
        reference = task.load_function("reference")
        dtype = getattr(torch, task.spec.dtypes[0])
        runs = []
        for shape in _shapes(task):
            g = torch.Generator(device="cpu").manual_seed(0)
            inputs = make(shape.dims, dtype, "cpu", g, "random")
            if sum(v.numel() for v in inputs.values() if isinstance(v, torch.Tensor)) > MAX_ELEMS:
                break
            wide = {
                k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                for k, v in inputs.items()
            }
            with torch.no_grad():
                out = reference(**wide, **task.spec.params)
            runs.append((list(out) if isinstance(out, tuple | list) else [out], shape.dims))
    except Exception:  # noqa: BLE001 - a description, never a reason to fail
        return []
    if not runs or not all(isinstance(o, torch.Tensor) for outs, _ in runs for o in outs):
        return []
    lines = []
    for k, o in enumerate(runs[0][0]):
        sizes = [(tuple(outs[k].shape), dims) for outs, dims in runs if len(outs) > k]
        kind = "the call's dtype" if o.is_floating_point() else f"{o.dtype} (compared exactly)"
        text = spelled(sizes)
        lines.append(f"shape ({text}), {kind}" if text else f"a 0-dim tensor, {kind}")
    return lines


def spelled(sizes: list[tuple[tuple[int, ...], dict[str, int]]]) -> str:
    """A tensor's shape in the task's dim names, from its shape on several task shapes
    (`sizes`: (tensor shape, the task shape's dims) each): a place is named by the one
    dim (the first, where several always coincide) equal to it on every shape; a place no
    dim fits is written as its number when it never changes, else as `N (at ROWSxCOLS)`."""
    if not sizes:
        return ""
    first, dims0 = sizes[0]
    same_rank = [(s, d) for s, d in sizes if len(s) == len(first)]
    names = []
    for i, n in enumerate(first):
        fits = [k for k in dims0 if all(d.get(k) == s[i] for s, d in same_rank)]
        if fits:
            names.append(fits[0])
        elif all(s[i] == n for s, _ in same_rank):
            names.append(str(n))
        else:
            names.append(f"{n} (at {'x'.join(str(v) for v in dims0.values())})")
    return ", ".join(names) + ("," if len(names) == 1 else "")


def _shapes(task: Task) -> list:
    """The CPU shapes, smallest first (at most MAX_SHAPES)."""
    return sorted(task.spec.cpu_shapes, key=lambda s: _numel(s.dims))[:MAX_SHAPES]


def _numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n
