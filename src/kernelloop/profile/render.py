"""Render a ProfileReport as plain text; `level` 0..3 trades detail for length, and
`prompt_text` picks the most detailed level that fits the agent's budget. The view
depends on the model (summary.py), never the other way round."""

from __future__ import annotations

from kernelloop.profile.deltas import fmt_bytes
from kernelloop.profile.metrics import FMA_HALVES, KernelProfile, pipe_label
from kernelloop.profile.roofline import Classification
from kernelloop.profile.summary import (
    CHARS_PER_TOKEN,
    TOKENS_PER_KERNEL,
    ProfileReport,
    estimate_tokens,
)

# (hints shown per kernel, characters per hint, show instruction mix, stalls shown)
_LEVELS = ((4, 320, True, 4), (3, 220, True, 3), (2, 160, False, 3), (1, 120, False, 2))


def _pct(v: float | None) -> str:
    return "n/a" if v is None else (f"{v:.1f}%" if v < 10 else f"{v:.0f}%")


def _time(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


def _dims(d: tuple[int, ...] | None, total: int | None) -> str:
    if d:
        return "(" + ",".join(str(x) for x in d) + ")"
    return str(total) if total is not None else "n/a"


def _count(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v >= 1e9:
        return f"{v / 1e9:.1f}G"
    return f"{v / 1e6:.1f}M" if v >= 1e6 else (f"{v / 1e3:.1f}K" if v >= 1e4 else f"{v:.0f}")


def _short(name: str, limit: int = 80) -> str:
    """Demangled C++ names can run to hundreds of characters of template arguments."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _join(label: str, parts: list[str | None], sep: str = "; ") -> str | None:
    """'  Label: a, b' from the parts that are known; None when nothing is."""
    known = [p for p in parts if p]
    return f"  {label}: " + sep.join(known) if known else None


def _if(v: float | None, text: str) -> str | None:
    return None if v is None else text


def _pipes(k: KernelProfile) -> str | None:
    """Top-level pipes as ncu charts them; FMA with its halves when one half runs much hotter."""
    top = {n: v for n, v in k.pipe_utilization_pct.items() if n not in FMA_HALVES}
    if not top:
        return None
    halves = {n: k.pipe_utilization_pct[n] for n in FMA_HALVES if n in k.pipe_utilization_pct}
    parts = []
    for name, v in sorted(top.items(), key=lambda kv: -kv[1])[:5]:
        text = f"{pipe_label(name)} {v:.0f}%"
        if name == "fma" and halves and max(halves.values()) - v >= 5:
            text += (
                " ("
                + " / ".join(f"{n[3:]} {h:.0f}%" for n, h in halves.items())
                + "; IMAD runs on heavy)"
            )
        parts.append(text)
    return "pipes " + ", ".join(parts)


# Fields a summary line reports; listed as not collected when ncu did not print them.
_KEY_FIELDS = {
    "dram_bytes_total": "DRAM bytes",
    "l2_hit_pct": "L2 hit rate",
    "registers_per_thread": "registers",
    "local_load_sectors": "spill traffic",
    "smem_bank_conflicts_load": "bank conflicts",
    "achieved_occupancy_pct": "achieved occupancy",
    "issue_slots_busy_pct": "issue slots",
    "eligible_warps_per_scheduler": "eligible warps",
    "pipe_utilization_pct": "pipe utilization",
    "stall_cycles_per_inst": "stall reasons",
}


def _kernel_block(i: int, n: int, k: KernelProfile, c: Classification, level: int) -> list[str]:
    hints, hint_chars, show_mix, n_stalls = _LEVELS[level]
    lines: list[str | None] = [
        f"Kernel {i}/{n} `{_short(k.name)}` grid {_dims(k.grid, k.grid_blocks)} block "
        f"{_dims(k.block, k.block_threads)}: {_time(k.duration_us)}; {c.bound.upper()} — "
        f"{c.evidence}"
    ]
    moved = None
    if k.dram_bytes_read is not None and k.dram_bytes_write is not None:
        moved = (
            f"{fmt_bytes(k.dram_bytes_read + k.dram_bytes_write)} moved (read "
            f"{fmt_bytes(k.dram_bytes_read)}, write {fmt_bytes(k.dram_bytes_write)})"
        )
    elif k.dram_bytes_total is not None:
        moved = f"~{fmt_bytes(k.dram_bytes_total)} moved (bandwidth × duration)"
    bps = k.global_load_bytes_per_sector
    lines.append(
        _join(
            "Memory",
            [
                _if(
                    k.dram_throughput_pct,
                    f"DRAM {_pct(k.dram_throughput_pct)} of peak DRAM bandwidth",
                ),
                moved,
                _if(k.dram_bandwidth_gbps, f"{k.dram_bandwidth_gbps or 0:.0f} GB/s"),
                _if(k.l1_hit_pct, f"L1 hit {_pct(k.l1_hit_pct)}"),
                _if(k.l2_hit_pct, f"L2 hit {_pct(k.l2_hit_pct)}"),
                _if(bps, f"global loads use {bps or 0:.1f} of 32 bytes per sector"),
            ],
        )
    )
    lines.append(
        _join(
            "Compute",
            [
                _if(k.sm_busy_pct, f"SM busy {_pct(k.sm_busy_pct)}"),
                _if(k.issue_slots_busy_pct, f"issue slots busy {_pct(k.issue_slots_busy_pct)}"),
                _pipes(k),
            ],
        )
    )
    smem = None
    if k.smem_static_bytes is not None or k.smem_dynamic_bytes is not None:
        smem = (
            f"shared memory {fmt_bytes(k.smem_static_bytes or 0)} static + "
            f"{fmt_bytes(k.smem_dynamic_bytes or 0)} dynamic per block"
        )
    conflicts = None
    if k.smem_bank_conflicts_load is not None or k.smem_bank_conflicts_store is not None:
        conflicts = (
            f"smem bank conflicts {_count(k.smem_bank_conflicts_load)} load / "
            f"{_count(k.smem_bank_conflicts_store)} store"
        )
        if k.smem_wavefronts:
            # Scale matters: 40K conflicts among 10M wavefronts (the baseline's LayerNorm) cost
            # nothing.
            share = (
                100
                * ((k.smem_bank_conflicts_load or 0) + (k.smem_bank_conflicts_store or 0))
                / k.smem_wavefronts
            )
            conflicts += f" ({share:.1f}% of {_count(k.smem_wavefronts)} shared wavefronts)"
    spills = None
    if k.local_load_sectors is not None or k.local_store_sectors is not None:
        spills = (
            f"local-memory (spill) sectors {_count(k.local_load_sectors)} load / "
            f"{_count(k.local_store_sectors)} store"
        )
    lines.append(
        _join(
            "Resources",
            [
                _if(k.registers_per_thread, f"{k.registers_per_thread or 0:.0f} registers/thread"),
                spills,
                smem,
                conflicts,
            ],
        )
    )
    # Block limits tie at 100% theoretical occupancy too; a limiter only matters below it.
    limited = k.occupancy_limiter and (k.theoretical_occupancy_pct or 100.0) < 99.5
    limiter = f" (limited by {k.occupancy_limiter})" if limited else ""
    lines.append(
        _join(
            "Occupancy",
            [
                _if(k.achieved_occupancy_pct, f"achieved {_pct(k.achieved_occupancy_pct)}"),
                _if(
                    k.theoretical_occupancy_pct,
                    f"theoretical {_pct(k.theoretical_occupancy_pct)}{limiter}",
                ),
                _if(k.waves_per_sm, f"{k.waves_per_sm or 0:.1f} waves per SM"),
            ],
        )
    )
    lines.append(
        _join(
            "Scheduler",
            [
                _if(
                    k.eligible_warps_per_scheduler,
                    f"{k.eligible_warps_per_scheduler or 0:.2f} eligible warps",
                ),
                _if(
                    k.active_warps_per_scheduler,
                    f"{k.active_warps_per_scheduler or 0:.2f} active warps per scheduler",
                ),
                _if(k.no_eligible_pct, f"no eligible warp {_pct(k.no_eligible_pct)} of cycles"),
                _if(
                    k.warp_cycles_per_issued_inst,
                    f"{k.warp_cycles_per_issued_inst or 0:.1f} cycles per issued instruction",
                ),
            ],
        )
    )
    stalls = k.top_stalls(n_stalls)
    if stalls:
        of = (
            f", of {k.warp_cycles_per_issued_inst:.1f} in all"
            if k.warp_cycles_per_issued_inst
            else ""
        )
        lines.append(
            f"  Top warp stalls (cycles per issued instruction{of}): "
            + ", ".join(f"{name} {v:.2f}" for name, v in stalls)
        )
    if show_mix and k.instruction_mix:
        total = sum(k.instruction_mix.values()) or 1.0
        top = [
            (n, v)
            for n, v in sorted(k.instruction_mix.items(), key=lambda kv: -kv[1])
            if v / total >= 0.01
        ][:6]
        lines.append(
            f"  Instruction mix ({_count(total)} thread instructions): "
            + ", ".join(f"{name} {100 * v / total:.0f}%" for name, v in top)
        )
    absent = [label for f, label in _KEY_FIELDS.items() if getattr(k, f) in (None, {})]
    if absent:
        lines.append("  Not in this report: " + ", ".join(absent))
    shown = [r for r in k.rules if r.kind in ("OPT", "WRN", "ERR")][:hints]
    if shown:
        lines.append("  Profiler hints (ranked by estimated speedup):")
        for r in shown:
            est = (
                f", est. {r.est_speedup_pct:.0f}% {r.speedup_type}".rstrip()
                if r.est_speedup_pct
                else ""
            )
            desc = (
                r.description
                if len(r.description) <= hint_chars
                else r.description[: hint_chars - 1] + "…"
            )
            lines.append(f"    - [{r.kind}{est}] {r.rule}: {desc}")
    return [ln for ln in lines if ln]


def _traffic_line(report: ProfileReport) -> str:
    n = len(report.kernels)
    kt = sum(k.duration_us or 0.0 for k in report.kernels)
    head = f"{n} kernel{'s' if n != 1 else ''} per call, {_time(kt)} of kernel time"
    total, floor, ratio = report.total_dram_bytes, report.min_bytes, report.traffic_ratio
    if total is None or not floor or ratio is None:
        return head + "."
    who = "together they" if n > 1 else "it"
    if ratio > 1.1:
        return (
            f"{head}; {who} moved {fmt_bytes(total)} DRAM bytes = {ratio:.1f}× the minimal "
            f"{fmt_bytes(floor)} ({fmt_bytes(total - floor)} extra: "
            f"{'intermediates and ' if n > 1 else ''}re-reads)."
        )
    # ncu counts bytes that reached DRAM during the kernel; dirty lines still in the 60 MB
    # L2 at its end are not counted, so a minimal-traffic kernel can read slightly under 1×.
    return (
        f"{head}; {who} moved {fmt_bytes(total)} DRAM bytes = {ratio:.2f}× the minimal "
        f"{fmt_bytes(floor)}: traffic is already minimal, so the distance to the floor is time "
        "spent elsewhere, not bytes."
    )


def render(report: ProfileReport, level: int = 0) -> str:
    n = len(report.kernels)
    src = (
        "Nsight Compute, one call after warm-up"
        if report.source == "ncu"
        else "no hardware counters"
    )
    head = f"PROFILE {report.candidate}".rstrip() + f" ({src}"
    head += f", {report.device})" if report.device else ")"
    lines = [head]
    rf = report.roofline
    if rf is not None:
        lines.append(
            f"Roofline: {_time(rf.measured_time_s * 1e6)} ({report.time_source}) vs floor "
            f"{_time(rf.floor_s * 1e6)} ({fmt_bytes(rf.min_bytes)} minimal DRAM bytes at "
            f"{fmt_bytes(rf.min_bytes / rf.memory_floor_s) if rf.memory_floor_s else 'n/a'}/s"
            + (f", {rf.min_flops:.3g} flops" if rf.min_flops else "")
            + f") = {rf.pct_of_floor:.0f}% of floor ({rf.model_bound} floor)."
        )
    elif report.memory_floor_s and report.min_bytes:
        lines.append(
            f"Roofline floor: {fmt_bytes(report.min_bytes)} minimal DRAM bytes = "
            f"{_time(report.memory_floor_s * 1e6)} on {report.ceiling_device}; no GPU time was "
            "measured here to compare with it."
        )
    if report.kernels:
        lines.append(_traffic_line(report))
    for i, (k, c) in enumerate(zip(report.kernels, report.classifications, strict=False), 1):
        lines += _kernel_block(i, n, k, c, level)
    if not report.kernels and report.classifications:
        lines.append(
            f"Bottleneck: {report.classifications[0].bound} — {report.classifications[0].evidence}"
        )
    if report.compile_facts:
        facts = "; ".join(
            f"`{f.name}`"
            + (f" ×{f.launches}" if f.launches else "")
            + (
                " (" + ", ".join(f"{k}={v}" for k, v in f.constexprs.items()) + ")"
                if f.constexprs
                else ""
            )
            + f" {f.n_regs} registers/thread, spills {f.spill_store_bytes} B stored / "
            f"{f.spill_load_bytes} B loaded, stack {f.stack_bytes} B, shared {f.shared_bytes} B, "
            f"{f.num_warps} warps"
            for f in report.compile_facts
        )
        lines.append(f"Compile facts (Triton, {report.compile_facts[0].arch}): {facts}")
        occ = [(f.name, f.occupancy()) for f in report.compile_facts]
        occ_text = [
            f"`{name}` {o.theoretical_pct:.1f}%"
            + (f" (limited by {o.limiter})" if o.theoretical_pct < 99.5 else "")
            for name, o in occ
            if o
        ]
        if occ_text:
            lines.append(
                "Theoretical occupancy from these facts (sm_90 limits: 64K registers, 64 warps, "
                "32 blocks, 228 KB shared per SM): " + "; ".join(occ_text)
            )
    if report.timings:
        lines.append(
            f"Kernel timings ({report.timings[0].source}, one call): "
            + ", ".join(f"`{t.name}` ×{t.launches} {_time(t.total_us)}" for t in report.timings)
        )
    if report.deltas:
        # Regressions get their own line below; listing them twice costs tokens.
        primary = [
            d
            for d in report.deltas
            if (not d.secondary or d.kernel == "all") and d not in report.regressions
        ]
        other = [d for d in report.deltas if d.secondary and d.kernel != "all" and not d.regression]
        moved = primary + other[: 6 - min(level, 3)]
        lines.append(
            "Vs parent: "
            + "; ".join(
                (f"[{d.kernel}] " if n > 1 and d.kernel != "all" else "") + d.describe()
                for d in moved
            )
        )
    if report.regressions:
        lines.append(
            "REGRESSIONS in secondary metrics (check before claiming a win): "
            + "; ".join(
                (f"[{d.kernel}] " if n > 1 else "") + d.describe() for d in report.regressions
            )
        )
    if report.missing:
        lines.append("Missing: " + "; ".join(report.missing) + ".")
    return "\n".join(lines)


def prompt_text(report: ProfileReport, max_tokens: int | None = None) -> str:
    """The report as plain text within a token budget (default TOKENS_PER_KERNEL per
    kernel); detail is dropped (hints, mix) before anything else, and only then is the
    text cut."""
    budget = max_tokens or TOKENS_PER_KERNEL * max(1, len(report.kernels))
    for level in range(4):
        text = render(report, level)
        if estimate_tokens(text) <= budget:
            return text
    return text[: budget * CHARS_PER_TOKEN - 20].rstrip() + "\n[summary truncated]"
