"""Before/after deltas against the parent variant, with regressions in secondary metrics flagged.

The seed's example: a bank-conflict fix that also dropped the L2 hit rate from 86% to 81%
should be visible to the reviewer even when the kernel got faster. Each tracked metric has
the direction that is better and the smallest change worth reporting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from kernelloop.profile.fallback import CompileFact
from kernelloop.profile.metrics import KernelProfile


@dataclass(frozen=True)
class Tracked:
    field: str
    label: str
    better: Literal["higher", "lower"]
    min_abs: float  # smaller changes are noise
    min_rel: float = 0.0
    unit: str = ""


# Percent metrics use absolute points; counts use relative change.
TRACKED: tuple[Tracked, ...] = (
    Tracked("duration_us", "duration", "lower", 0.0, 0.02, "us"),
    Tracked("dram_bytes_total", "DRAM bytes", "lower", 0.0, 0.03, "B"),
    Tracked("l2_hit_pct", "L2 hit", "higher", 2.0, unit="%"),
    Tracked("l1_hit_pct", "L1 hit", "higher", 2.0, unit="%"),
    Tracked("global_load_bytes_per_sector", "bytes used per sector", "higher", 2.0, unit="B"),
    Tracked("achieved_occupancy_pct", "achieved occupancy", "higher", 5.0, unit="%"),
    Tracked("theoretical_occupancy_pct", "theoretical occupancy", "higher", 5.0, unit="%"),
    Tracked("registers_per_thread", "registers/thread", "lower", 8.0),
    Tracked("local_load_sectors", "local (spill) load sectors", "lower", 1.0, 0.10),
    Tracked("local_store_sectors", "local (spill) store sectors", "lower", 1.0, 0.10),
    Tracked("smem_bank_conflicts_load", "smem bank conflicts (load)", "lower", 1000.0, 0.10),
    Tracked("smem_bank_conflicts_store", "smem bank conflicts (store)", "lower", 1000.0, 0.10),
    Tracked("eligible_warps_per_scheduler", "eligible warps/scheduler", "higher", 0.2, 0.15),
    Tracked("warp_cycles_per_issued_inst", "cycles per issued instruction", "lower", 1.0, 0.15),
    Tracked("issue_slots_busy_pct", "issue slots busy", "higher", 5.0, unit="%"),
)


class MetricDelta(BaseModel):
    kernel: str
    metric: str
    label: str
    before: float
    after: float
    unit: str = ""
    regression: bool

    @property
    def secondary(self) -> bool:
        return self.metric != "duration_us"

    def describe(self) -> str:
        before, after = fmt_value(self.before, self.unit), fmt_value(self.after, self.unit)
        return f"{self.label} {before} → {after} ({_change(self)})"


def _change(d: MetricDelta) -> str:
    if d.unit == "%":
        return f"{d.after - d.before:+.1f} pts"
    if d.before == 0:
        return "new" if d.after else "same"
    return f"{100 * (d.after - d.before) / abs(d.before):+.0f}%"


def fmt_value(v: float, unit: str = "") -> str:
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "B":
        return fmt_bytes(v) if v >= 1000 else f"{v:.1f} B"
    if unit == "us":
        return f"{v / 1000:.3f} ms" if v >= 1000 else f"{v:.1f} us"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.1f}K"
    return f"{v:.3g}" if v != int(v) else f"{int(v)}"


def fmt_bytes(b: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}" if b / scale < 100 else f"{b / scale:.0f} {unit}"
    return f"{b:.0f} B"


def _get(k: KernelProfile, field: str) -> float | None:
    v = getattr(k, field)
    return float(v) if v is not None else None


def kernel_deltas(before: KernelProfile, after: KernelProfile, kernel: str) -> list[MetricDelta]:
    out: list[MetricDelta] = []
    for t in TRACKED:
        b, a = _get(before, t.field), _get(after, t.field)
        if b is None or a is None:
            continue
        diff = a - b
        if abs(diff) < t.min_abs or (t.min_rel and abs(diff) < t.min_rel * max(abs(b), 1e-12)):
            continue
        worse = diff > 0 if t.better == "lower" else diff < 0
        out.append(
            MetricDelta(
                kernel=kernel,
                metric=t.field,
                label=t.label,
                before=b,
                after=a,
                unit=t.unit,
                regression=worse,
            )
        )
    return out


def match_kernels(
    parent: list[KernelProfile], child: list[KernelProfile]
) -> list[tuple[KernelProfile, KernelProfile]]:
    """Pairs by kernel name; with equal counts and no shared names, by position (a rename)."""
    by_name = {k.name: k for k in parent}
    pairs = [(by_name[k.name], k) for k in child if k.name in by_name]
    if not pairs and len(parent) == len(child):
        pairs = list(zip(parent, child, strict=True))
    return pairs


def profile_deltas(parent: list[KernelProfile], child: list[KernelProfile]) -> list[MetricDelta]:
    """Per-kernel deltas where kernels match, else one delta on the totals."""
    pairs = match_kernels(parent, child)
    if pairs:
        out: list[MetricDelta] = []
        for p, c in pairs:
            out += kernel_deltas(p, c, c.name)
        return out
    return total_deltas(parent, child)


def total_deltas(parent: list[KernelProfile], child: list[KernelProfile]) -> list[MetricDelta]:
    out: list[MetricDelta] = []
    for field, label, unit in (
        ("duration_us", "total kernel time", "us"),
        ("dram_bytes_total", "total DRAM bytes", "B"),
    ):
        b = [_get(k, field) for k in parent]
        a = [_get(k, field) for k in child]
        if None in b or None in a or not b or not a:
            continue
        sb, sa = sum(b), sum(a)  # type: ignore[arg-type]
        out.append(
            MetricDelta(
                kernel="all",
                metric=field,
                label=label,
                before=sb,
                after=sa,
                unit=unit,
                regression=sa > sb * 1.02,
            )
        )
    # Fusing kernels trades traffic for registers: the seed's "secondary metric" check on a
    # split→fused change is the worst kernel's registers and the time-weighted occupancy.
    for label, field, better, fold, unit in (
        ("registers/thread (max over kernels)", "registers_per_thread", "lower", _max, ""),
        (
            "achieved occupancy (time-weighted)",
            "achieved_occupancy_pct",
            "higher",
            _time_weighted,
            "%",
        ),
    ):
        b, a = fold(parent, field), fold(child, field)
        if b is None or a is None:
            continue
        t = next(x for x in TRACKED if x.field == field)
        if abs(a - b) < t.min_abs:
            continue
        out.append(
            MetricDelta(
                kernel="all",
                metric=field,
                label=label,
                before=b,
                after=a,
                unit=unit,
                regression=(a > b) if better == "lower" else (a < b),
            )
        )
    n_b, n_a = len(parent), len(child)
    if n_b != n_a:
        out.append(
            MetricDelta(
                kernel="all",
                metric="kernel_count",
                label="kernels per call",
                before=n_b,
                after=n_a,
                regression=n_a > n_b,
            )
        )
    return out


def _max(kernels: list[KernelProfile], field: str) -> float | None:
    vals = [_get(k, field) for k in kernels]
    return None if not vals or None in vals else max(vals)  # type: ignore[type-var]


def _time_weighted(kernels: list[KernelProfile], field: str) -> float | None:
    pairs = [(_get(k, field), k.duration_us) for k in kernels]
    if not pairs or any(v is None or d is None for v, d in pairs):
        return None
    total = sum(d for _, d in pairs)  # type: ignore[misc]
    return sum(v * d for v, d in pairs) / total if total else None  # type: ignore[operator]


def fact_deltas(parent: list[CompileFact], child: list[CompileFact]) -> list[MetricDelta]:
    """Without counters: kernel count, the worst kernel's registers and the spill bytes, from
    compile facts."""
    out: list[MetricDelta] = []

    def launches(facts: list[CompileFact]) -> int:
        return sum(f.launches or 1 for f in facts)

    def regs(facts: list[CompileFact]) -> float | None:
        vals = [f.n_regs for f in facts if f.n_regs is not None]
        return float(max(vals)) if vals else None

    def spills(facts: list[CompileFact]) -> float | None:
        vals = [f.spill_store_bytes for f in facts]
        return None if not vals or None in vals else float(sum(vals))  # type: ignore[arg-type]

    for metric, label, fold, unit, min_abs in (
        ("registers_per_thread", "registers/thread (max over kernels)", regs, "", 8.0),
        ("spill_store_bytes", "spill stores", spills, "B", 1.0),
    ):
        b, a = fold(parent), fold(child)
        if b is not None and a is not None and abs(a - b) >= min_abs:
            out.append(
                MetricDelta(
                    kernel="all",
                    metric=metric,
                    label=label,
                    before=b,
                    after=a,
                    unit=unit,
                    regression=a > b,
                )
            )
    if launches(parent) != launches(child):
        out.append(
            MetricDelta(
                kernel="all",
                metric="kernel_count",
                label="kernel launches per call",
                before=launches(parent),
                after=launches(child),
                regression=launches(child) > launches(parent),
            )
        )
    return out
