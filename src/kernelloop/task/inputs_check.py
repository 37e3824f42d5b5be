"""The input generator's tensors against the task's declared dims and dtypes, before any
candidate is judged (issue 36: a generator that ignored `dims` was accepted silently and
its tensors labelled with the declared shapes; a transposed one ran 400 s with no output).

The generator is the task's trusted code; it is called on the CPU on the task's two
smallest CPU shapes (a few thousand elements), in every task dtype, case `random`. What
is checked, each failure one sentence naming the input:
- it returns a dict of named arguments, its tensors on the device asked for;
- an axis whose size follows a dim on one shape follows the same dim on the other (a
  transposed or hard-coded tensor breaks this), and a generator whose tensors keep one
  size on shapes of different dims ignores `dims`;
- a floating tensor is either of the call's dtype in every dtype or of one fixed dtype in
  all of them, and at least one tensor follows the call's dtype.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.task.load import Task, load_task

# The task's code runs in a process of its own with only these variables: never beside a
# model key of the calling process (the run's agent may hold one).
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
TIMEOUT_S = 300.0


def scrubbed_env() -> dict[str, str]:
    """The environment a child that runs task code gets: no model key of this process."""
    return {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}


def check_inputs_apart(task: Task) -> None:
    """`check_inputs` in a child process with a scrubbed environment; its one-sentence
    error raised here."""
    env = scrubbed_env()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernelloop.task.inputs_check", str(task.folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise KernelloopError(
            f"the input generator of task {task.name} took over {TIMEOUT_S:.0f} s on its two "
            "smallest CPU shapes; make it fast on small shapes."
        ) from None
    if done.returncode == 2:
        raise KernelloopError(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[:300]
        raise KernelloopError(
            f"checking the input generator of task {task.name} failed ({tail}); fix the task's "
            "inputs file."
        )


def check_inputs(task: Task) -> None:
    """Raise KernelloopError (one sentence, the fix) where the generator's tensors do not
    follow the task's declared dims and dtypes; return quietly otherwise."""
    import torch

    from kernelloop.task.names_check import check_cases, check_names

    check_names(task)
    make = task.load_function("inputs")
    shapes = sorted(task.spec.cpu_shapes, key=lambda s: _numel(s.dims))[:2]
    where = f"{task.spec.task.inputs} of task {task.name}"
    got: dict[tuple[int, str], dict[str, object]] = {}
    for i, shape in enumerate(shapes):
        for d in task.spec.dtypes:
            g = torch.Generator(device="cpu").manual_seed(0)
            try:
                out = make(dict(shape.dims), getattr(torch, d), "cpu", g, "random")
            except Exception as e:  # noqa: BLE001 - the task's code: said, with its error
                raise KernelloopError(
                    f"{where} raised {type(e).__name__}: {str(e)[:200]} on dims {shape.dims}, "
                    f"dtype {d}; fix the generator (it must accept every declared shape)."
                ) from None
            if not isinstance(out, dict) or not all(isinstance(k, str) for k in out):
                raise KernelloopError(
                    f"{where} returned {type(out).__name__}, not a dict of named arguments; "
                    "return {name: tensor, ...} in the entry's argument order."
                )
            for name, v in out.items():
                if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                    raise KernelloopError(
                        f"input `{name}` is on {v.device} when {where} was asked for cpu; "
                        "create every tensor on the `device` argument."
                    )
            got[(i, d)] = out
    _check_dtypes(got, task.spec.dtypes, where)
    if shapes:
        check_cases(task, make, shapes[0].dims, task.spec.dtypes[0])
    if len(shapes) == 2:
        _check_dims(got, shapes[0].dims, shapes[1].dims, task.spec.dtypes[0], where)


def _check_dtypes(got: dict, dtypes: list[str], where: str) -> None:
    import torch

    for d in dtypes:
        floats = {
            n: v
            for n, v in got[(0, d)].items()
            if isinstance(v, torch.Tensor) and v.is_floating_point()
        }
        if floats and not any(str(v.dtype) == f"torch.{d}" for v in floats.values()):
            name, v = next(iter(floats.items()))
            raise KernelloopError(
                f"input `{name}` is {str(v.dtype).removeprefix('torch.')} when {where} was "
                f"asked for {d}, and no input follows the call's dtype; cast with "
                "`.to(dtype)`."
            )
    for name in got[(0, dtypes[0])]:
        kinds = {
            d: str(getattr(got[(0, d)].get(name), "dtype", "")).removeprefix("torch.")
            for d in dtypes
        }
        follows = [d for d, k in kinds.items() if k == d]
        if follows and len(follows) < len(dtypes) and len(set(kinds.values())) > 1:
            odd = next(d for d in dtypes if kinds[d] != d)
            raise KernelloopError(
                f"input `{name}` is {kinds[odd]} when {where} was asked for {odd}, though it "
                f"follows the call's dtype for {', '.join(follows)}; make it follow the "
                "dtype in every case or keep one fixed dtype."
            )


def _check_dims(got: dict, a: dict, b: dict, dtype: str, where: str) -> None:
    import torch

    ta, tb = got[(0, dtype)], got[(1, dtype)]
    changed = [k for k in a if a[k] != b.get(k)]
    followers, fixed = [], []
    for name, va in ta.items():
        vb = tb.get(name)
        if not isinstance(va, torch.Tensor) or not isinstance(vb, torch.Tensor):
            continue
        if va.dim() != vb.dim():
            raise KernelloopError(
                f"input `{name}` has {va.dim()} dims on {_label(a)} but {vb.dim()} on "
                f"{_label(b)}; {where} must give it the same layout on every shape."
            )
        follows = False
        for axis, (sa, sb) in enumerate(zip(va.shape, vb.shape, strict=True)):
            names = [k for k in changed if a[k] == sa]
            if sa == sb or not names:
                continue
            if not any(b[k] == sb for k in names):
                k = names[0]
                raise KernelloopError(
                    f"input `{name}` has shape {tuple(vb.shape)} on {_label(b)}: its axis "
                    f"{axis} is {sb}, not {k} = {b[k]} as on {_label(a)} (shape "
                    f"{tuple(va.shape)}); build it from `dims` (transposed or hard-coded?)."
                )
            follows = True
        (followers if follows else fixed).append((name, va, vb))
    if changed and not followers and fixed:
        name, va, _ = fixed[0]
        raise KernelloopError(
            f"input `{name}` (and every other input) keeps shape {tuple(va.shape)} on "
            f"{_label(a)} and on {_label(b)}: {where} ignores `dims`; build the tensors from "
            "dims so each shape is judged at its declared size."
        )
    for name, va, vb in fixed:  # a fixed tensor shaped like a follower was meant to follow
        for other, oa, _ in followers:
            if va.shape == oa.shape and va.dim() > 0 and _spells(va.shape, a, changed):
                raise KernelloopError(
                    f"input `{name}` keeps shape {tuple(vb.shape)} on {_label(b)} while "
                    f"`{other}`, of the same shape on {_label(a)}, follows dims; build "
                    f"`{name}` from `dims` too."
                )


def _spells(shape, dims: dict, changed: list[str]) -> bool:
    return all(any(dims[k] == n for k in changed) for n in shape)


def _label(dims: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items())


def _numel(dims: dict[str, int]) -> int:
    n = 1
    for v in dims.values():
        n *= v
    return n


if __name__ == "__main__":  # check_inputs_apart's child: exit 2 with the sentence on stderr
    try:
        check_inputs(load_task(Path(sys.argv[1])))
    except KernelloopError as e:
        print(str(e).replace("\n", " "), file=sys.stderr)
        sys.exit(2)
