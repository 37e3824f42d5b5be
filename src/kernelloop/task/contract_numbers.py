"""The contract's numeric sections: numerics (dtypes, tolerances, the precision contract),
randomness (the stochastic checks and their bands) and the roofline (each shape's floor
on the judged device and the best's % of it)."""

from __future__ import annotations

import math

from kernelloop.task.contract_judging import SHORT_DTYPE, Judging
from kernelloop.task.load import ELEM_SIZES, Task
from kernelloop.task.model_error import margin_words
from kernelloop.task.roofline import flops_kind, rate_of


def numerics(task: Task, j: Judging) -> str:
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
        "float32 compute floor is at the float32-accurate rate (the fastest of the FP32 "
        "units, 3xTF32 or bf16x6 on the tensor cores)."
    )


def randomness(task: Task, j: Judging) -> str:
    st = task.spec.stochastic
    if st is None:
        return ""
    rate, seed = st.rate_param, st.seed_param
    p_task = task.spec.params.get(rate, st.rates[0] if st.rates else 0.0)
    listed = ", ".join(f"{r:g}" for r in sorted({0.1, 0.2, 0.3, *st.rates, float(p_task)}))
    lines = [
        "### Randomness: exactly what the judge checks",
        f"`{rate}` and `{seed}` are keyword arguments; `{seed}` is small (0, 1, 42), a "
        f"step counter, 31-, 32- or 63-bit. {rate} judged: 0, {listed} and rates drawn "
        f"over [0.01, 0.95) per evaluation (the benchmark times {rate}={p_task:g}). The random and "
        f"determinism calls run with {rate}={p_task:g}, the extreme cases with {rate}=0 on "
        f"some shapes and dtypes and {rate}={p_task:g} on the others, every randomness "
        f"check on the same `random` inputs the benchmark times; with {rate}=0 the output "
        "must match the reference.",
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
        "sigma) overall, and by the sign and size of the values, by row and column block, "
        "per call and summed over calls;",
        f"- rows' and columns' masks must be independent at many lags and in random pairs "
        f"(pairs differ in 2·{rate}·(1-{rate}));",
        f"- the same inputs and `{seed}` must give identical bytes;",
        f"- a related `{seed}` (+1, -1, a bit flipped, +2^16) or another must give an "
        "independent mask, also shifted by rows or columns; an honest mask fails each of "
        "these tests with probability < 1e-12.",
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


def roofline(task: Task, j: Judging) -> str:
    rl = task.spec.roofline
    sizes = ", ".join(f"{SHORT_DTYPE.get(d, d)} {ELEM_SIZES[d]}" for d in task.spec.dtypes)
    lines = [
        "### Roofline",
        f"Minimal DRAM traffic per call: `{rl.bytes}` bytes (elem_size: {sizes}).",
    ]
    c = j.ceiling
    if counts_flops(task):
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
    if not counts_flops(task):
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


def counts_flops(task: Task) -> bool:
    expr = task.spec.roofline.flops.strip()
    return expr not in ("0", "0.0", "")


# ---- helpers ------------------------------------------------------------------------------
