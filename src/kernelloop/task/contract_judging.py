"""What the contract is told about where and how a candidate is judged (`Judging`: the
device, its floors, the best's numbers — computed by the callers, loop/context.py), and
the short names and time format every section uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelloop.task.roofline import Ceiling, Floor

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


def ms_text(ms: float) -> str:
    return f"{ms:.4f} ms" if ms < 1 else f"{ms:.3f} ms"
