"""The roofline floor of a task: per shape and dtype, the least time the GPU's ceilings
allow, max(minimal bytes / DRAM rate, minimal flops / peak rate of the dtype).

The ceilings come from the peak table (`peaks.toml` beside this file: vendor datasheets,
and a measured DRAM rate where the project has one), overridden per machine by a file
named in `KERNELLOOP_PEAKS` and per task by `[roofline.peaks."NAME"]`. A task without
`[roofline] flops` (or with flops "0") gets the memory floor, as before compute floors
existed. Everything that quotes a floor — the evaluation's and the benchmark's % of floor,
the contract, the per-shape tables, the profile summary — asks `floor_on` here.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from kernelloop.errors import TaskError
from kernelloop.task.adhoc import AD_HOC, floor_depends_on_dims
from kernelloop.task.load import Task
from kernelloop.task.spec import PeakOverride, Shape

PEAKS_ENV = "KERNELLOOP_PEAKS"
TABLE_PATH = Path(__file__).with_name("peaks.toml")
# The device a floor is quoted for when the judged device has none (a CPU run): the GPU
# this project measures speed on.
REFERENCE_GPU = "NVIDIA H200"


@dataclass(frozen=True)
class Ceiling:
    """What one GPU can do at most: DRAM bytes/s and dense peak flop/s by dtype name."""

    device: str  # the name the ceilings are for (the GPU's reported name)
    table_name: str  # the table entry's name ("" for a GPU only overrides describe)
    dram_bytes_per_s: float
    flops_per_s: dict[str, float] = field(default_factory=dict)
    dram_source: str = ""
    flops_source: str = ""

    @property
    def source(self) -> str:
        parts = [self.dram_source, self.flops_source]
        return "; ".join(dict.fromkeys(p for p in parts if p))


@dataclass(frozen=True)
class Floor:
    """One shape and dtype's floor on one GPU. `compute_ms` is None where the task counts
    no flops or the GPU has no peak rate for the dtype (`note` says which)."""

    memory_ms: float
    compute_ms: float | None
    bound: Literal["memory", "compute"]
    flops_dtype: str
    note: str = ""

    @property
    def ms(self) -> float:
        return max(self.memory_ms, self.compute_ms or 0.0)


def floor_on(task: Task, shape: Shape, dtype: str, device_name: str) -> Floor | None:
    """The floor of `shape` in `dtype` on the GPU called `device_name`; None where no DRAM
    rate is known for it (an unknown GPU with no override, or a CPU)."""
    if shape.tag == AD_HOC and not floor_depends_on_dims(task):
        return None  # a floor of one fixed size (an imported problem's), not this shape's
    ceiling = ceiling_for(device_name, task.spec.roofline.peaks)
    return floor_with(task, shape, dtype, ceiling) if ceiling else None


def floor_with(task: Task, shape: Shape, dtype: str, ceiling: Ceiling) -> Floor:
    memory_ms = task.min_bytes(shape, dtype) / ceiling.dram_bytes_per_s * 1e3
    flops = task.min_flops(shape, dtype)
    kind = flops_kind(task, dtype)
    if flops <= 0:
        return Floor(memory_ms, None, "memory", kind)
    rate = rate_of(ceiling, kind)
    if rate is None:
        note = (
            f"no {kind} peak rate for {ceiling.table_name or ceiling.device}: memory floor "
            f"only (add one with [roofline.peaks] tflops.{kind})"
        )
        return Floor(memory_ms, None, "memory", kind, note)
    compute_ms = flops / rate * 1e3
    bound: Literal["memory", "compute"] = "compute" if compute_ms > memory_ms else "memory"
    return Floor(memory_ms, compute_ms, bound, kind)


def rate_of(ceiling: Ceiling, kind: str) -> float | None:
    """The peak flop/s of `kind` on `ceiling`'s GPU. Full-precision float32 is the fastest
    float32-accurate way the GPU has: its FP32 rate, or the tensor cores through operand
    splitting — 3xTF32 (`tl.dot(..., input_precision="tf32x3")`) at a third of the TF32
    rate, bf16x6 at a sixth of bf16's. A floor at the FP32 rate alone was beaten on the
    H200 by an honest 3xTF32 GEMM (KernelBench level2/12, 74 TFLOP/s against FP32's 67,
    max error 2.9e-6, 2026-12-03)."""
    rates = ceiling.flops_per_s
    if kind != "float32" or kind not in rates:
        return rates.get(kind)
    split = [rates.get("tfloat32", 0.0) / 3, rates.get("bfloat16", 0.0) / 6]
    return max(rates["float32"], *split)


def flops_kind(task: Task, dtype: str) -> str:
    """The peak rate a task's flops run at in `dtype`: `[roofline] flops_dtype` where set;
    float32 at the TF32 tensor-core rate only where `[precision] tf32` allows it (else the
    float32-accurate rate, `rate_of`: a floor at the TF32 rate would ask a full-precision
    kernel for 3x what it can do on an H200); any other dtype at its own dense rate."""
    if task.spec.roofline.flops_dtype:
        return task.spec.roofline.flops_dtype
    if dtype == "float32" and task.spec.precision.tf32:
        return "tfloat32"
    return dtype


def precision_hint(task: Task, floor: Floor | None, dtype: str) -> str:
    """Why a kernel can beat a compute floor at the FP32 rate: it does not compute at full
    float32 precision — which the task's contract forbids (`[precision] tf32 = false`).
    On the H200 an honest-looking KernelBench GEMM solution (`tl.dot`'s TF32 default) ran
    at 111% of its FP32 floor and passed the float32 tolerance of 1e-2 (2026-12-03)."""
    if floor is None or floor.bound != "compute" or flops_kind(task, dtype) != "float32":
        return ""
    return (
        "faster than float32-accurate arithmetic allows on this GPU (FP32 units, or 3xTF32 "
        "on the tensor cores), so it computes below float32 precision (plain TF32: "
        "`tl.dot`'s default for float32 inputs), which this "
        'task forbids ([precision] tf32 = false): pass input_precision="ieee", or set tf32 = '
        "true where the task allows TF32"
    )


def ceiling_for(
    device_name: str, task_peaks: dict[str, PeakOverride] | None = None
) -> Ceiling | None:
    """The ceilings of the GPU called `device_name`: the table's entry, then the machine's
    overrides (KERNELLOOP_PEAKS), then the task's; None without a DRAM rate."""
    if not device_name:
        return None
    entry = _table_entry(device_name)
    dram = entry.dram if entry else None
    flops = dict(entry.flops) if entry else {}
    dram_src = entry.dram_source if entry else ""
    flops_src = entry.source if entry and flops else ""
    layers = [(f"{PEAKS_ENV}={os.environ.get(PEAKS_ENV)}", _machine_overrides())]
    layers.append(("the task's [roofline.peaks]", task_peaks or {}))
    for where, overrides in layers:
        for key, o in overrides.items():
            if key not in device_name:
                continue
            by = f"{where} ({key!r})"
            if o.dram_tb_s is not None:
                dram = o.dram_tb_s * 1e12
                dram_src = f"DRAM rate from {by}"
            if o.tflops:
                flops.update({d: r * 1e12 for d, r in o.tflops.items()})
                rates = ", ".join(sorted(o.tflops))
                flops_src = f"{flops_src}; {rates} from {by}" if flops_src else f"{rates} from {by}"
    if dram is None:
        return None
    return Ceiling(
        device=device_name,
        table_name=entry.name if entry else "",
        dram_bytes_per_s=dram,
        flops_per_s=flops,
        dram_source=dram_src,
        flops_source=flops_src,
    )


def reference_ceiling(task: Task) -> Ceiling | None:
    """The reference GPU's ceilings, with the task's overrides for it."""
    return ceiling_for(REFERENCE_GPU, task.spec.roofline.peaks)


# ---- the table and the machine's overrides ------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    name: str
    match: tuple[str, ...]
    unless: tuple[str, ...]
    dram: float
    dram_source: str
    flops: dict[str, float]
    source: str


def _table_entry(device_name: str) -> _Entry | None:
    for e in _table():
        if any(m in device_name for m in e.match) and not any(u in device_name for u in e.unless):
            return e
    return None


@cache
def _table() -> tuple[_Entry, ...]:
    raw = tomllib.loads(TABLE_PATH.read_text())
    entries = []
    for g in raw["gpu"]:
        measured = "measured_dram_tb_s" in g
        dram = g["measured_dram_tb_s"] if measured else g["dram_tb_s"]
        entries.append(
            _Entry(
                name=g["name"],
                match=tuple(g["match"]),
                unless=tuple(g.get("unless", ())),
                dram=float(dram) * 1e12,
                dram_source=g["measured_dram_source"] if measured else "datasheet",
                flops={d: float(r) * 1e12 for d, r in g["tflops"].items()},
                source=g["source"],
            )
        )
    return tuple(entries)


_OVERRIDES = TypeAdapter(dict[str, PeakOverride])


def _machine_overrides() -> dict[str, PeakOverride]:
    """The `[peaks."NAME"]` tables of the file named in KERNELLOOP_PEAKS (none if unset)."""
    path = os.environ.get(PEAKS_ENV)
    if not path:
        return {}
    return _read_overrides(path)


def _read_overrides(path: str) -> dict[str, PeakOverride]:
    fix = f'write [peaks."GPU NAME"] tables with dram_tb_s and tflops, or unset {PEAKS_ENV}'
    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TaskError(f"{PEAKS_ENV}={path} cannot be read as TOML ({e}); {fix}.") from None
    extra = sorted(set(raw) - {"peaks"})
    if extra:
        raise TaskError(f"{PEAKS_ENV}={path}: unknown top-level key(s) {extra}; {fix}.")
    try:
        return _OVERRIDES.validate_python(raw.get("peaks", {}))
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TaskError(f"{PEAKS_ENV}={path}: peaks.{where}: {err['msg']}; {fix}.") from None
