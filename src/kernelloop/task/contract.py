"""The task's contract in words, rendered once and read everywhere: the LLM prompt, the
MCP `task` tool and `kernelloop task show`.

What a candidate must do to be accepted — the reference, the inputs and their extreme
cases, the shapes with their weights, the dtypes and tolerances, the randomness checks,
the roofline — is said here from the task's own files and from what the trusted judge
checks (`evaluate/trusted/values/plan.py`, `judge.py`, `compare.py`), not from a hand-written
summary that could drift. The numbers that need a device or a run (each shape's floor
time on the judged device, the best's per-shape time and % of floor) are computed by the
callers (`objective.py`, through `loop/context.py`) and handed in as `Judging`.

Each section has a token budget (task/textbudget.py), so a long reference cannot crowd
out what follows it; a cut is marked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from importlib import metadata

from kernelloop import pyast
from kernelloop.task.contract_io import describe_inputs, describe_outputs
from kernelloop.task.contract_judging import SHORT_DTYPE, Judging, ms_text
from kernelloop.task.contract_numbers import (
    counts_flops,
    numerics,
    randomness,
    roofline,
)
from kernelloop.task.e2e_model import e2e_section
from kernelloop.task.load import Task
from kernelloop.task.spec import Shape
from kernelloop.task.textbudget import approx_tokens, fit

# Tokens per section (approx_tokens); the whole contract stays within their sum.
SECTION_BUDGETS: dict[str, int] = {
    "judging": 200,
    "interface": 450,
    "reference": 1200,
    "inputs": 700,
    "shapes": 700,
    "numerics": 380,  # with the precision contract
    "randomness": 620,  # 580 until issue 45 (seed families, strata, lags, related seeds)
    "end_to_end": 150,
    "roofline": 250,
}
CONTRACT_BUDGET = sum(SECTION_BUDGETS.values())


@dataclass(frozen=True)
class Contract:
    sections: dict[str, str]  # name -> text, each within its budget

    def text(self) -> str:
        return "\n\n".join(self.sections.values())

    def tokens(self) -> int:
        return approx_tokens(self.text())


def render_contract(task: Task, judging: Judging | None = None) -> Contract:
    """The contract of `task` as judged per `judging` (None: no device chosen yet)."""
    j = judging or Judging()
    raw = {
        "judging": _judging(task, j),
        "interface": _interface(task),
        "reference": _reference(task),
        "inputs": _inputs(task, j),
        "shapes": _shapes(task, j),
        "numerics": numerics(task, j),
        "randomness": randomness(task, j),
        "end_to_end": e2e_section(task, list(j.dtypes) or list(task.spec.dtypes)),
        "roofline": roofline(task, j),
    }
    return Contract(
        {k: fit(v, SECTION_BUDGETS[k], f"the {k} section") for k, v in raw.items() if v}
    )


# ---- sections ---------------------------------------------------------------------------


def _judging(task: Task, j: Judging) -> str:
    if not j.device_name:
        return (
            "### Where it is judged\nNo device chosen yet: a run judges on its GPU (the "
            "task's shapes) or, without one, on the CPU (its small cpu_shapes, correctness only).\n"
            + _versions(j)
        )
    hw = [j.device]
    if j.compute_capability:
        hw.append(f"sm_{j.compute_capability.replace('.', '')}")
    if j.sm_count:
        hw.append(f"{j.sm_count} SMs")
    where = f"{j.device_name} ({', '.join(hw)})"
    if j.interpreter or (j.device == "cpu" and task.spec.task.language != "torch"):
        where += ", kernels run in the Triton interpreter"
    lines = ["### Where it is judged", f"Candidates are judged on {where}.", _versions(j)]
    if j.timings_count:
        lines.append("Timings here count: a measurably faster, correct candidate is promoted.")
    else:
        lines.append(
            "Timings here DO NOT count: this run checks correctness only and can promote no "
            "speedup (nothing is promoted). Write for the task's GPU shapes below all the same."
        )
    return "\n".join(lines)


def _versions(j: Judging) -> str:
    """The versions that decide which APIs a candidate may use."""
    torch_v = j.torch or _installed("torch")
    triton_v = j.triton or _installed("triton")
    where = "the judging machine's" if j.torch else "this machine's"
    return (
        f"Software ({where}): torch {torch_v or 'not installed'}, triton "
        f"{triton_v or 'not installed'}; use only APIs these versions have."
    )


def _installed(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _interface(task: Task) -> str:
    info = task.spec.task
    sig = entry_signature(task.baseline_path.read_text(), info.entry)
    lines = ["### Interface", f"`{sig or info.entry + '(...)'}` ({info.language})."]
    if task.spec.params:
        kv = ", ".join(f"{k}={v!r}" for k, v in task.spec.params.items())
        lines.append(f"Keyword arguments of every call (task defaults): {kv}.")
    lines += describe_inputs(task)
    lines += _model_new(task)
    outputs = [] if info.output_like else describe_outputs(task)
    if len(outputs) > 1:
        lines.append(
            f"Output: a tuple of {len(outputs)} new, contiguous tensors, in the reference's "
            "order (each judged on its own, against the reference's output of that place):"
        )
        lines += [f"- output {k}: {o}" for k, o in enumerate(outputs)]
        lines.append(
            "No output may share memory with an input or another output, inputs must not "
            "be modified, and no work may continue after the call returns."
        )
        return "\n".join(lines)
    like = (
        f"the shape, dtype and device of `{info.output_like}`"
        if info.output_like
        else "the shape of the reference's output (a 0-dim tensor for a scalar), the dtype "
        "being judged for a floating-point output and the reference's own dtype otherwise "
        "(compared exactly), on the inputs' device" + (f": {outputs[0]}" if outputs else "")
    )
    lines.append(
        f"Output: a new, contiguous torch.Tensor with {like}; it must not share memory with "
        "an input, inputs must not be modified, and no work may continue after the call "
        "returns."
    )
    return "\n".join(lines)


def _model_new(task: Task) -> list[str]:
    """An imported KernelBench task's other form of candidate (task/kernelbench_inputs.py,
    `model_entry`): a `ModelNew` class built from the problem's constructor arguments."""
    try:
        spec = task.model_class()
    except Exception:  # noqa: BLE001 - a description, never a reason to fail
        return []
    if not spec:
        return []
    init = spec.get("init")
    state = ", ".join(f"`{n}`" for n in spec.get("state", [])) or "none"
    return [
        f"Or, instead of `{task.spec.task.entry}`, define `class {spec.get('class', 'ModelNew')}"
        "(nn.Module)` as KernelBench solutions do: the judge builds it once per size with the "
        f"problem's constructor arguments ({init!r} for the problem's own sizes) and calls "
        f"its forward({', '.join(spec.get('forward_args', []))}). Its constructor may keep "
        "those constants (a size, an eps, a scale) as attributes for its kernels; its "
        f"parameters and buffers must carry Model's names ({state}): the task's values are "
        "swapped in by name."
    ]


def _reference(task: Task) -> str:
    path, func = task.file_and_function("reference")
    source = path.read_text().rstrip("\n")
    return (
        f"### Reference (`{path.name}:{func}`, run on the trusted side in float64)\n"
        f"```python\n{source}\n```"
    )


def _inputs(task: Task, j: Judging) -> str:
    path, func = task.file_and_function("inputs")
    suites = task.spec.suites
    lines = [f"### Inputs (`{path.name}:{func}`) and the cases the judge runs"]
    doc = _docstring(path.read_text())
    if doc:
        lines.append(doc)
    cases = [f"`random` ({suites.random_repeats} draw(s) per shape and dtype)"]
    if suites.extreme_cases:
        cases.append("extreme: " + ", ".join(f"`{c}`" for c in suites.extreme_cases))
    lines.append(
        "Judged on every shape and dtype: "
        + "; ".join(cases)
        + ", all from fresh secret seeds per evaluation; the extreme cases also run in "
        "every task dtype on the smallest selected shape. Plus a determinism check (the "
        "same inputs twice give identical bytes; the same input tensors refilled with new "
        "values must give a fresh result: an output cached by input address, shape or seed "
        "is rejected as stateful) and "
        + (
            "no shape beyond the listed ones: the task declares its shapes closed."
            if task.spec.task.closed_shapes
            else "extra shapes drawn per evaluation from the task's ranges that no listed "
            "shape has (one with every varying size odd and past 64 where its range "
            "allows): a kernel must be correct for every shape the op accepts; do not "
            "special-case listed sizes."
        )
    )
    if j.unseen:
        fixed = any(k not in j.unseen for s in task.spec.shapes[:1] for k in s.dims)
        ranges = ", ".join(f"{k} in [{lo}, {hi}]" for k, (lo, hi) in j.unseen.items())
        lines.append(
            f"The extra shape's ranges: {ranges} (log-uniform, odd values where possible, "
            "never a listed value, no more elements than the largest judged shape)"
            + ("; the other dimensions keep their listed value." if fixed else ".")
        )
    return "\n".join(lines)


def _shapes(task: Task, j: Judging) -> str:
    judged = set(j.shapes)
    dtypes = list(j.dtypes) or list(task.spec.dtypes)
    best = {r.get("shape"): r for r in j.best_rows}
    groups = [("GPU shapes (what the objective is measured on)", task.spec.shapes)]
    groups.append(("CPU shapes (small, for machines without a GPU)", task.spec.cpu_shapes))
    lines = ["### Shapes (weights are the objective's: a weighted geometric mean of speedups)"]
    if j.floors:
        lines.append(f"Floor times on the {j.floor_device} (see Roofline).")
    for title, shapes in groups:
        if not shapes:
            continue
        whole = bool(judged) and all(s.label in judged for s in shapes)
        lines.append(f"{title}{' — judged here' if whole else ''}:")
        for s in shapes:
            line = _shape_line(task, s, dtypes, j, best.get(s.label))
            lines.append(
                f"- {line}{'; judged in this run' if s.label in judged and not whole else ''}"
            )
    if j.best_label and not j.best_rows:
        lines.append(
            f"Best so far ({j.best_label}): no per-shape times"
            + ("" if j.timings_count else " (timings do not count on this device)")
            + "."
        )
    return "\n".join(lines)


def _shape_line(task: Task, s: Shape, dtypes: list[str], j: Judging, row: dict | None) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in s.dims.items())
    parts = [f"{s.label} ({dims}): weight {s.weight:g}, {s.tag}"]
    flops_counted = counts_flops(task)
    floors: dict[tuple[float, str], list[str]] = {}
    for d in dtypes:
        f = j.floors.get((s.label, d))
        if f is not None:
            bound = f" {f.bound}-bound" if flops_counted else ""
            floors.setdefault((round(f.ms, 6), bound), []).append(SHORT_DTYPE.get(d, d))
    if floors:
        parts.append(
            "floor "
            + " / ".join(
                f"{ms_text(ms)}{bound} ({', '.join(ds)})"
                for (ms, bound), ds in sorted(floors.items())
            )
        )
    if row and row.get("median_ms"):
        best = f"best {j.best_label}: {ms_text(row['median_ms'])}"
        if row.get("dtype"):
            best += f" {SHORT_DTYPE.get(row['dtype'], row['dtype'])}"
        if row.get("pct_of_floor"):
            roof = f"the {row['bound']} floor" if flops_counted and row.get("bound") else "floor"
            best += f" = {row['pct_of_floor']:.1f}% of {roof}"
        if row.get("speedup_vs_baseline"):
            best += f", {row['speedup_vs_baseline']:.2f}x the baseline"
        parts.append(best)
    return "; ".join(parts)


def entry_signature(source: str, entry: str) -> str:
    """`def entry(args)` as written in `source`, or "" when it does not parse or lacks it."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry:
            return f"def {entry}({ast.unparse(node.args)})"
    return ""


def _docstring(source: str) -> str:
    try:
        return (ast.get_docstring(pyast.parse(source)) or "").strip()
    except SyntaxError:
        return ""
