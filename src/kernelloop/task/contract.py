"""The task's contract in words, rendered once and read everywhere: the LLM prompt, the
MCP `task` tool and `kernelloop task show`.

What a candidate must do to be accepted — the reference, the inputs and their extreme
cases, the shapes with their weights, the dtypes and tolerances, the randomness checks,
the roofline — is said here from the task's own files and from what the trusted judge
checks (`evaluate/trusted/plan.py`, `judge.py`, `compare.py`), not from a hand-written
summary that could drift. The numbers that need a device or a run (each shape's floor
time on the judged device, the best's per-shape time and % of floor) are computed by the
callers (`objective.py`, through `loop/context.py`) and handed in as `Judging`.

Each section has a token budget (task/textbudget.py), so a long reference cannot crowd
out what follows it; a cut is marked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelloop.task.contract_io import describe_inputs, describe_outputs
from kernelloop.task.e2e_model import e2e_section
from kernelloop.task.load import ELEM_SIZES, Task
from kernelloop.task.model_error import margin_words
from kernelloop.task.roofline import Ceiling, Floor
from kernelloop.task.spec import Shape
from kernelloop.task.textbudget import approx_tokens, fit

# Tokens per section (approx_tokens); the whole contract stays within their sum.
SECTION_BUDGETS: dict[str, int] = {
    "judging": 200,
    "interface": 450,
    "reference": 1200,
    "inputs": 700,
    "shapes": 700,
    "numerics": 250,
    "randomness": 550,
    "end_to_end": 150,
    "roofline": 250,
}
CONTRACT_BUDGET = sum(SECTION_BUDGETS.values())

SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}


@dataclass(frozen=True)
class Judging:
    """Where and how the candidate is judged, and the numbers that need a device or a run.

    `floors` maps (shape label, dtype) to the roofline floor on `floor_device` (the
    judged device when its ceilings are known, else the device the task's floors are
    quoted for), from `ceiling`. `best_rows` is the best's per-shape table
    (objective.shape_rows)."""

    device: str = "cpu"  # "cuda" | "cpu"
    device_name: str = ""
    timings_count: bool = False
    interpreter: bool = False
    compute_capability: str | None = None
    sm_count: int | None = None
    shapes: tuple[str, ...] = ()  # labels judged on this device
    dtypes: tuple[str, ...] = ()
    floor_device: str = ""
    ceiling: Ceiling | None = None
    floors: dict[tuple[str, str], Floor] = field(default_factory=dict)
    best_label: str = ""
    best_objective: float | None = None
    best_rows: tuple[dict, ...] = ()


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
        "inputs": _inputs(task),
        "shapes": _shapes(task, j),
        "numerics": _numerics(task, j),
        "randomness": _randomness(task),
        "end_to_end": e2e_section(task, list(j.dtypes) or list(task.spec.dtypes)),
        "roofline": _roofline(task, j),
    }
    return Contract(
        {k: fit(v, SECTION_BUDGETS[k], f"the {k} section") for k, v in raw.items() if v}
    )


# ---- sections ---------------------------------------------------------------------------


def _judging(task: Task, j: Judging) -> str:
    if not j.device_name:
        return (
            "### Where it is judged\nNo device chosen yet: a run judges on its GPU (the "
            "task's shapes) or, without one, on the CPU (its small cpu_shapes, correctness only)."
        )
    hw = [j.device]
    if j.compute_capability:
        hw.append(f"sm_{j.compute_capability.replace('.', '')}")
    if j.sm_count:
        hw.append(f"{j.sm_count} SMs")
    where = f"{j.device_name} ({', '.join(hw)})"
    if j.interpreter or (j.device == "cpu" and task.spec.task.language != "torch"):
        where += ", kernels run in the Triton interpreter"
    lines = ["### Where it is judged", f"Candidates are judged on {where}."]
    if j.timings_count:
        lines.append("Timings here count: a measurably faster, correct candidate is accepted.")
    else:
        lines.append(
            "Timings here DO NOT count: this run checks correctness only and can accept no "
            "speedup (nothing is promoted). Write for the task's GPU shapes below all the same."
        )
    return "\n".join(lines)


def _interface(task: Task) -> str:
    info = task.spec.task
    sig = entry_signature(task.baseline_path.read_text(), info.entry)
    lines = ["### Interface", f"`{sig or info.entry + '(...)'}` ({info.language})."]
    if task.spec.params:
        kv = ", ".join(f"{k}={v!r}" for k, v in task.spec.params.items())
        lines.append(f"Keyword arguments of every call (task defaults): {kv}.")
    lines += describe_inputs(task)
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


def _reference(task: Task) -> str:
    path, func = task.file_and_function("reference")
    source = path.read_text().rstrip("\n")
    return (
        f"### Reference (`{path.name}:{func}`, run on the trusted side in float64)\n"
        f"```python\n{source}\n```"
    )


def _inputs(task: Task) -> str:
    path, func = task.file_and_function("inputs")
    suites = task.spec.suites
    st = task.spec.stochastic
    lines = [f"### Inputs (`{path.name}:{func}`) and the cases the judge runs"]
    doc = _docstring(path.read_text())
    if doc:
        lines.append(doc)
    cases = [f"`random` ({suites.random_repeats} draw(s) per shape and dtype)"]
    if suites.extreme_cases:
        cases.append("extreme: " + ", ".join(f"`{c}`" for c in suites.extreme_cases))
    if st is not None:
        cases.append(f"`{st.case}` for the randomness checks")
    lines.append(
        "Judged on every shape and dtype: "
        + "; ".join(cases)
        + ", all from fresh secret seeds per evaluation; the extreme cases also run in "
        "every task dtype on the smallest selected shape. Plus a determinism check (the "
        "same inputs twice give identical bytes) and one extra shape drawn per evaluation "
        "from the task's ranges that no listed shape has: do not special-case listed sizes."
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
    counts_flops = _counts_flops(task)
    floors: dict[tuple[float, str], list[str]] = {}
    for d in dtypes:
        f = j.floors.get((s.label, d))
        if f is not None:
            bound = f" {f.bound}-bound" if counts_flops else ""
            floors.setdefault((round(f.ms, 6), bound), []).append(SHORT_DTYPE.get(d, d))
    if floors:
        parts.append(
            "floor "
            + " / ".join(
                f"{_ms(ms)}{bound} ({', '.join(ds)})" for (ms, bound), ds in sorted(floors.items())
            )
        )
    if row and row.get("median_ms"):
        best = f"best {j.best_label}: {_ms(row['median_ms'])}"
        if row.get("dtype"):
            best += f" {SHORT_DTYPE.get(row['dtype'], row['dtype'])}"
        if row.get("pct_of_floor"):
            roof = f"the {row['bound']} floor" if counts_flops and row.get("bound") else "floor"
            best += f" = {row['pct_of_floor']:.1f}% of {roof}"
        if row.get("speedup_vs_baseline"):
            best += f", {row['speedup_vs_baseline']:.2f}x the baseline"
        parts.append(best)
    return "; ".join(parts)


def _numerics(task: Task, j: Judging) -> str:
    dtypes = list(j.dtypes) or list(task.spec.dtypes)
    tol = task.spec.tolerances
    per = "; ".join(f"{d}: atol={tol[d].atol:g}, rtol={tol[d].rtol:g}" for d in dtypes)
    return (
        "### Dtypes and tolerances\n"
        f"Dtypes judged: {', '.join(dtypes)} (task: {', '.join(task.spec.dtypes)}). "
        "Every output element must satisfy |out - ref| <= atol + rtol * |ref|, against the "
        "reference computed in float64 on the same inputs; a NaN or Inf where the reference "
        f"is finite fails. {per}.{margin_words([tol[d] for d in dtypes], 'the reference')}"
    )


def _randomness(task: Task) -> str:
    st = task.spec.stochastic
    if st is None:
        return ""
    rate, seed = st.rate_param, st.seed_param
    p_task = task.spec.params.get(rate, st.rates[0] if st.rates else 0.0)
    rates = sorted({0.0, *st.rates, float(p_task)})
    lines = [
        "### Randomness: exactly what the judge checks",
        f"`{rate}` and `{seed}` are keyword arguments; kernelloop passes a fresh 31-bit "
        f"`{seed}` per call. {rate} values judged: {', '.join(f'{r:g}' for r in rates)} "
        f"(every listed rate on the first shape, {rate}={p_task:g} elsewhere; the "
        f"benchmark times {rate}={p_task:g}). The random, extreme and determinism cases "
        f"run with {rate}=0: no element dropped, the output must match the reference.",
    ]
    if st.contract.strip():
        lines.append(f"The operation's randomness, in the task's words: {st.contract.strip()}")
    lines += [
        f"With {rate} > 0, on the `{st.case}` inputs:",
        f"- every element must equal either its kept value (the reference with "
        f"`{st.mask_param}` all True) or its dropped value (`{st.mask_param}` all False), "
        "within the dtype's tolerance;",
        f"- the fraction dropped must fit {rate} (binomial test, ±{st.confidence_sigmas:g} sigma);",
        f"- the same inputs and `{seed}` must give identical bytes;",
        f"- a different `{seed}` must give an independent mask: the fraction of elements kept "
        f"in one call and dropped in the other must fit 2·{rate}·(1-{rate}) "
        f"(±{st.confidence_sigmas:g} sigma).",
        "Nothing else about the mask is checked: it need NOT match the baseline's (or any "
        "particular generator's) mask bit for bit. Any RNG, any counter layout and any "
        "number of random bits per element is fine while the checks above hold.",
    ]
    return "\n".join(lines)


def _roofline(task: Task, j: Judging) -> str:
    rl = task.spec.roofline
    sizes = ", ".join(f"{SHORT_DTYPE.get(d, d)} {ELEM_SIZES[d]}" for d in task.spec.dtypes)
    lines = [
        "### Roofline",
        f"Minimal DRAM traffic per call: `{rl.bytes}` bytes (elem_size: {sizes}).",
    ]
    c = j.ceiling
    if _counts_flops(task):
        at = f"the {rl.flops_dtype} peak" if rl.flops_dtype else "the judged dtype's dense peak"
        lines.append(f"Minimal flops per call: `{rl.flops}` (a multiply-add is 2), at {at}.")
    if c is None:
        lines.append(
            "No DRAM ceiling is known for this device, so no floor time or % of floor is given."
        )
        return "\n".join(lines)
    mem = f"bytes / {c.dram_bytes_per_s / 1e12:.2f} TB/s"
    mem += f" ({c.dram_source})" if c.dram_source else ""
    pct = "% of floor = floor time / median time x 100 (100 = at the roofline)."
    if not _counts_flops(task):
        lines.append(f"Floor time = {mem} on the {j.floor_device}; {pct}")
        return "\n".join(lines)
    dtypes = list(j.dtypes) or list(task.spec.dtypes)
    kinds = [rl.flops_dtype] if rl.flops_dtype else dtypes
    rates = ", ".join(
        f"{SHORT_DTYPE.get(k, k)} {c.flops_per_s[k] / 1e12:g}" if k in c.flops_per_s
        else f"{SHORT_DTYPE.get(k, k)} unknown (memory floor only)"
        for k in dict.fromkeys(kinds)
    )  # fmt: skip
    src = f"; {c.flops_source}" if c.flops_source else ""
    lines.append(
        f"Floor time = max({mem}, flops / peak) on the {j.floor_device}; peak TFLOP/s: "
        f"{rates}{src}. Each shape's floor says which bound it is (memory or compute); {pct}"
    )
    return "\n".join(lines)


def _counts_flops(task: Task) -> bool:
    expr = task.spec.roofline.flops.strip()
    return expr not in ("0", "0.0", "")


# ---- helpers ------------------------------------------------------------------------------


def entry_signature(source: str, entry: str) -> str:
    """`def entry(args)` as written in `source`, or "" when it does not parse or lacks it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry:
            return f"def {entry}({ast.unparse(node.args)})"
    return ""


def _docstring(source: str) -> str:
    try:
        return (ast.get_docstring(ast.parse(source)) or "").strip()
    except SyntaxError:
        return ""


def _ms(ms: float) -> str:
    return f"{ms:.4f} ms" if ms < 1 else f"{ms:.3f} ms"
