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
import math
from dataclasses import dataclass, field
from importlib import metadata

from kernelloop.task.contract_io import describe_inputs, describe_outputs
from kernelloop.task.e2e_model import e2e_section
from kernelloop.task.load import ELEM_SIZES, Task
from kernelloop.task.model_error import margin_words
from kernelloop.task.roofline import Ceiling, Floor, flops_kind, rate_of
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
    "randomness": 580,  # 550 until the undeclared rate's words (plan.undeclared_rate)
    "end_to_end": 150,
    "roofline": 250,
}
CONTRACT_BUDGET = sum(SECTION_BUDGETS.values())

SHORT_DTYPE = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "float64": "fp64",
    "tfloat32": "tf32",
}


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
    # The judging machine's torch and triton (its evaluation record's, else this one's).
    torch: str = ""
    triton: str = ""
    # The ranges the extra (undeclared) shape of each evaluation is drawn from, per
    # dimension, as evaluate/trusted/values/undeclared.py's `undeclared_ranges` gives them
    # (loop/context.py).
    unseen: dict[str, tuple[int, int]] = field(default_factory=dict)


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
        "numerics": _numerics(task, j),
        "randomness": _randomness(task, j),
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
        lines.append("Timings here count: a measurably faster, correct candidate is accepted.")
    else:
        lines.append(
            "Timings here DO NOT count: this run checks correctness only and can accept no "
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
        f"is finite fails. {per}.{margin_words([tol[d] for d in dtypes], 'the reference')}\n"
        + precision_text(task)
    )


def precision_text(task: Task) -> str:
    """The task's precision contract in one or two sentences (`[precision]`, task/spec.py)."""
    if task.spec.precision.tf32:
        return (
            "Precision: float32 matmuls and convolutions may round their inputs to TF32 "
            "(Triton's `tl.dot` default); a float32 compute floor is at the TF32 tensor-core "
            "rate."
        )
    return (
        "Precision: float32 is computed at full float32 precision; TF32 is not allowed. "
        'Triton\'s `tl.dot` rounds float32 inputs to TF32 unless given `input_precision="ieee"`'
        " (the CPU interpreter emulates that rounding, so it fails there as on a GPU); a "
        "float32 compute floor is at the FP32 (non-tensor-core) rate."
    )


def _randomness(task: Task, j: Judging) -> str:
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
        f"(every listed rate and one drawn above them on the first shape, "
        f"{rate}={p_task:g} elsewhere; the "
        f"benchmark times {rate}={p_task:g}). The random and determinism calls run with "
        f"{rate}={p_task:g}, the extreme cases with {rate}=0 on some shapes and dtypes and "
        f"{rate}={p_task:g} on the others, every randomness check on the same `random` "
        f"inputs the benchmark times; with {rate}=0 the output must match the reference.",
    ]
    if st.contract.strip():
        lines.append(f"The operation's randomness, in the task's words: {st.contract.strip()}")
    lines += [
        f"With {rate} > 0, in every suite:",
        f"- every element must equal either its kept value (the reference with "
        f"`{st.mask_param}` all True) or its dropped value (`{st.mask_param}` all False), "
        "within atol + rtol·|kept − dropped| (the tolerance is on the random term, not on "
        "the whole value) plus one unit of the output dtype at the value;",
        f"- the fraction dropped must fit {rate} (binomial test, ±{st.confidence_sigmas:g} "
        "sigma), over all elements and within each half split by the size of the dropped "
        "value and by the size of the term;",
        f"- neighbouring rows' and neighbouring columns' masks must be independent (the "
        f"fraction of pairs that differ fits 2·{rate}·(1-{rate}));",
        f"- the same inputs and `{seed}` must give identical bytes;",
        f"- a different `{seed}` must give an independent mask: the fraction of elements kept "
        f"in one call and dropped in the other must fit 2·{rate}·(1-{rate}) "
        f"(±{st.confidence_sigmas:g} sigma).",
        _drop_band(task, j, float(p_task)),
        "Nothing else about the mask is checked: it need NOT match the baseline's (or any "
        "particular generator's) mask bit for bit. Any RNG, any counter layout and any "
        "number of random bits per element is fine while the checks above hold.",
    ]
    return "\n".join(line for line in lines if line)


def _drop_band(task: Task, j: Judging, p: float) -> str:
    """How tight the dropped-fraction test is at the task's rate on the heaviest GPU shape
    and the first CPU one: ±sigmas·sqrt(p(1-p)/n) of the fraction, as compare_mask.binomial_ok
    computes it, with n the shape's element count (an output of the shape's dims). A
    generator too coarse for the GPU's band passes the CPU's."""
    st = task.spec.stochastic
    if st is None or not 0 < p < 1:
        return ""
    picks = []
    if task.spec.shapes:
        picks.append(("GPU", max(task.spec.shapes, key=lambda s: s.weight)))
    if task.spec.cpu_shapes:
        picks.append(("CPU", task.spec.cpu_shapes[0]))
    bands = []
    for where, s in picks:
        n = math.prod(s.dims.values())
        band = st.confidence_sigmas * math.sqrt(p * (1 - p) / n)
        bands.append(f"±{band:.2g} at the {where}'s {s.label} ({n:,} elements)")
    return (
        f"- so at {st.rate_param}={p:g} the dropped fraction may stray from {p:g} by "
        + " but ".join(bands)
        + ": a generator with few random bits per element (an 8-bit threshold rounds "
        f"{p:g} to a multiple of 1/256) can pass the CPU's band and fail the GPU's."
    )


def _roofline(task: Task, j: Judging) -> str:
    rl = task.spec.roofline
    sizes = ", ".join(f"{SHORT_DTYPE.get(d, d)} {ELEM_SIZES[d]}" for d in task.spec.dtypes)
    lines = [
        "### Roofline",
        f"Minimal DRAM traffic per call: `{rl.bytes}` bytes (elem_size: {sizes}).",
    ]
    c = j.ceiling
    if _counts_flops(task):
        at = (
            f"the {rl.flops_dtype} peak"
            if rl.flops_dtype
            else "the judged dtype's dense peak (float32: "
            + ("TF32's" if task.spec.precision.tf32 else "FP32's, TF32 not allowed")
            + ")"
        )
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
    kinds = [flops_kind(task, d) for d in dtypes]
    rates = ", ".join(
        f"{SHORT_DTYPE.get(k, k)} {rate_of(c, k) / 1e12:.4g}" if k in c.flops_per_s
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
