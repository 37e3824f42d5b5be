"""The task's own reference run in the judged dtype, against itself in float64: how much
of each tolerance PyTorch's own arithmetic uses at the task's shapes (`kernelloop task
show TASK --reference-error`; docs/task.md, "Tolerances"). A tolerance an honest PyTorch
already uses most of will reject honest kernels somewhere; one it uses 0.1% of leaves
room for a wrong kernel.

The reference is called twice on the same inputs (case `random` and each of the task's
extreme cases, seed 0): with every floating tensor upcast to float64, as the judge does,
and as drawn in the dtype. A [stochastic] task runs with its rate at 0 and every element
kept. Task code: run in a child process with a scrubbed environment (as inputs_check).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.task.load import Task, load_task

TIMEOUT_S = 600.0


def measure(task: Task, shapes: list, dtypes: list[str]) -> list[dict]:
    """One row per shape × dtype × case: max rel err (|own − ref| / max(|ref|, atol)) and
    the share of the tolerance used (max |own − ref| / (atol + rtol·|ref|))."""
    import torch

    from kernelloop.task.generic_cases import with_generic_cases
    from kernelloop.task.model_error import used

    make = with_generic_cases(task.load_function("inputs"))
    reference = task.load_function("reference")
    st = task.spec.stochastic
    rows = []
    for shape in shapes:
        for d in dtypes:
            tol, dtype = task.spec.tolerances[d], getattr(torch, d)
            for case in ["random", *task.spec.suites.extreme_cases]:
                g = torch.Generator(device="cpu").manual_seed(0)
                inputs = make(dict(shape.dims), dtype, "cpu", g, case)
                params = dict(task.spec.params)
                if st is not None:
                    like = inputs[task.spec.task.output_like]
                    params[st.rate_param], params[st.seed_param] = 0.0, 0
                    params[st.mask_param] = torch.ones(like.shape, dtype=torch.bool)
                wide = {k: _up(v) for k, v in inputs.items()}
                with torch.no_grad():
                    ref, own = reference(**wide, **params), reference(**inputs, **params)
                if isinstance(ref, tuple | list):  # several outputs: the worst of them
                    pairs = list(zip(own, ref, strict=True))
                else:
                    pairs = [(own, ref)]
                share = max(used(o, r, tol) for o, r in pairs)
                rel = max(_rel(o, r, tol.atol) for o, r in pairs)
                rows.append(
                    {"shape": shape.label, "dtype": d, "case": case, "max_rel_err": rel,
                     "tol_used": share, "atol": tol.atol, "rtol": tol.rtol}
                )  # fmt: skip
    return rows


def _up(v):
    import torch

    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.to(torch.float64)
    return v


def _rel(out, ref, atol: float) -> float:
    import torch

    if out.shape != ref.shape or not out.is_floating_point():
        return math.nan
    r = ref.to(torch.float64)
    err = (out.to(torch.float64) - r).abs()
    finite = torch.isfinite(r) & torch.isfinite(err)
    if not bool(finite.any()):
        return math.nan
    rel = err[finite] / r[finite].abs().clamp_min(atol if atol > 0 else 1e-300)
    return float(rel.max().item())


def measure_apart(task: Task, shape_labels: list[str], dtypes: list[str]) -> list[dict]:
    """`measure` in a child process with the environment inputs_check keeps."""
    from kernelloop.task.inputs_check import scrubbed_env

    args = [sys.executable, "-m", "kernelloop.task.reference_error", str(task.folder)]
    args += [",".join(shape_labels), ",".join(dtypes)]
    try:
        done = subprocess.run(
            args, env=scrubbed_env(), capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise KernelloopError(
            f"running the reference of task {task.name} twice per shape took over "
            f"{TIMEOUT_S:.0f} s; pass smaller shapes (--shapes)."
        ) from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[:300]
        raise KernelloopError(
            f"measuring the reference's own error failed ({tail}); fix the task's reference "
            "or inputs file."
        )
    return json.loads(done.stdout)


if __name__ == "__main__":
    t = load_task(Path(sys.argv[1]))
    labels = set(sys.argv[2].split(","))
    picked = [s for s in [*t.spec.cpu_shapes, *t.spec.shapes] if s.label in labels]
    seen, unique = set(), []
    for s in picked:
        if s.label not in seen:
            seen.add(s.label)
            unique.append(s)
    print(json.dumps(measure(t, unique, sys.argv[3].split(","))))
