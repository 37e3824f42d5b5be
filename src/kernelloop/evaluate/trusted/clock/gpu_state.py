"""The GPU's clocks and throttle reasons around a benchmark, read with nvidia-smi."""

from __future__ import annotations

import shutil
import subprocess
from typing import Literal

from kernelloop.evaluate.trusted.clock.bench_record import BenchmarkRecord, GpuState

_SMI_FIELDS = [
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks_throttle_reasons.active",
    "temperature.gpu",
    "power.draw",
]


def read_gpu_state(when: Literal["before", "after"], gpu: int | None = None) -> GpuState | None:
    """Clocks and throttle reasons of GPU `gpu` (None: the first) from nvidia-smi (None
    where it is missing)."""
    if not shutil.which("nvidia-smi"):
        return None
    # Newer drivers call the throttle field clocks_event_reasons; try both names.
    for fields in (
        _SMI_FIELDS,
        [f.replace("clocks_throttle_reasons", "clocks_event_reasons") for f in _SMI_FIELDS],
    ):
        try:
            r = subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
                + (["-i", str(gpu)] if gpu is not None else []),
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if r.returncode == 0 and r.stdout.strip():
            vals = [v.strip() for v in r.stdout.splitlines()[0].split(",")]
            raw = dict(zip(_SMI_FIELDS, vals, strict=False))
            return GpuState(
                when=when,
                sm_clock_mhz=_num(raw.get("clocks.sm")),
                mem_clock_mhz=_num(raw.get("clocks.mem")),
                throttle_reasons=raw.get("clocks_throttle_reasons.active"),
                temperature_c=_num(raw.get("temperature.gpu")),
                power_w=_num(raw.get("power.draw")),
                raw=raw,
            )
    return None


# Bits of nvidia-smi's throttle mask that do not slow a running kernel: GPU idle (0x1)
# and application clocks setting (0x2). Anything else (power cap 0x4, thermal 0x20/0x40,
# HW slowdown 0x8 …) during a benchmark is worth a reviewer's attention.
_BENIGN_THROTTLE = 0x1 | 0x2


def throttle_warnings(rec: BenchmarkRecord) -> None:
    for g in rec.gpu_state:
        try:
            mask = int(g.throttle_reasons or "0", 16)
        except ValueError:
            continue
        if mask & ~_BENIGN_THROTTLE:
            rec.warnings.append(
                f"clocks throttled {g.when} the run (reasons {g.throttle_reasons}, SM "
                f"{g.sm_clock_mhz} MHz)"
            )


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None
