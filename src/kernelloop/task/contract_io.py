"""The entry's inputs and outputs as an agent's brief spells them (contract.py): run on the
CPU on the task's smallest CPU shape — the input generator and the reference are the
task's trusted code — and written in the task's dimension names."""

from __future__ import annotations

from kernelloop.task.load import Task

# Inputs (weights included) above which the reference is not run for the brief (float64).
MAX_ELEMS = 1 << 24


def describe_inputs(task: Task) -> list[str]:
    """The entry's tensor arguments as the task's generator makes them: names, shapes in
    the task's dimension names, dtypes (per call dtype) and contiguity. The generator is
    the task's trusted code, run on the CPU on its smallest CPU shape."""
    try:
        import torch

        make = task.load_function("inputs")
        shape = min(task.spec.cpu_shapes, key=lambda s: _numel(s.dims))
        seen: dict[str, list[tuple[str, object]]] = {}
        for d in task.spec.dtypes:
            g = torch.Generator(device="cpu").manual_seed(0)
            for name, v in make(shape.dims, getattr(torch, d), "cpu", g, "random").items():
                seen.setdefault(name, []).append((d, v))
    except Exception as e:  # noqa: BLE001 - a description, never a reason to fail
        return [f"Inputs: (could not be described: {type(e).__name__}: {str(e)[:120]})"]
    lines = ["Tensor inputs (positional, in this order):"]
    for name, per in seen.items():
        lines.append(f"- {_describe_one(name, per, shape.dims)}")
    return lines


def _describe_one(name: str, per: list[tuple[str, object]], dims: dict[str, int]) -> str:
    import torch

    first = per[0][1]
    if not isinstance(first, torch.Tensor):
        return f"`{name}`: {type(first).__name__} {first!r}"
    by_name = {}
    for k, n in dims.items():
        by_name.setdefault(n, []).append(k)
    spelled = [by_name[n][0] if len(by_name.get(n, [])) == 1 else str(n) for n in first.shape]
    same = all(isinstance(v, torch.Tensor) and str(v.dtype) == f"torch.{d}" for d, v in per)
    if same:
        dtype = "the call's dtype"
    else:
        dtype = ", ".join(
            sorted({str(getattr(v, "dtype", "?")).removeprefix("torch.") for _, v in per})
        )
    contiguous = all(isinstance(v, torch.Tensor) and v.is_contiguous() for _, v in per)
    return (
        f"`{name}`: shape ({', '.join(spelled)}{',' if len(spelled) == 1 else ''}), {dtype}, "
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
        shape = min(task.spec.cpu_shapes, key=lambda s: _numel(s.dims))
        g = torch.Generator(device="cpu").manual_seed(0)
        dtype = getattr(torch, task.spec.dtypes[0])
        inputs = make(shape.dims, dtype, "cpu", g, "random")
        if sum(v.numel() for v in inputs.values() if isinstance(v, torch.Tensor)) > MAX_ELEMS:
            return []
        wide = {
            k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in inputs.items()
        }
        with torch.no_grad():
            out = reference(**wide, **task.spec.params)
    except Exception:  # noqa: BLE001 - a description, never a reason to fail
        return []
    outs = list(out) if isinstance(out, tuple | list) else [out]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return []
    lines = []
    for o in outs:
        spelled = _spelled(o.shape, shape.dims)
        kind = "the call's dtype" if o.is_floating_point() else f"{o.dtype} (compared exactly)"
        lines.append(f"shape ({spelled}), {kind}" if spelled else f"a 0-dim tensor, {kind}")
    return lines


def _spelled(shape, dims: dict[str, int]) -> str:
    by_size: dict[int, list[str]] = {}
    for k, n in dims.items():
        by_size.setdefault(n, []).append(k)
    names = [by_size[n][0] if len(by_size.get(n, [])) == 1 else str(n) for n in shape]
    return ", ".join(names) + ("," if len(names) == 1 else "")


def _numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n
