"""The compiled slot timed in turn (issue 34's memory plan: every worker fits, "or times
them in turn"). Where the memory plan left the compiled slot out beside the gate's slots —
a KernelBench problem at its own size: on the H200 (2026-12-05) level1/19, 23 and 36 at
4096x393216 and 112x64x512x512 had four workers of ~27-29 GiB and the trusted side's
float64 audit, past 90% of 139 GiB — it is timed after them, in a second session beside
the baseline alone. The candidate's speedup over torch.compile is then its speedup over
the baseline (the gate's session) times the baseline's over the compiled slot (this one):
each factor a ratio of two implementations timed side by side in one session, never a
ratio of medians from two sessions. The compiled slot is held to the same rules as beside
the gate's slots (compiled once, no recompile while timed, checked against eager, audited);
if anything stops it, the record says why and shows no speedup over torch.compile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kernelloop.evaluate.protocol import COMPILED
from kernelloop.evaluate.trusted.clock.bench_fill import impl_timing
from kernelloop.evaluate.trusted.clock.bench_record import (
    BenchmarkRecord,
    CompiledTurn,
    compiled_speedup,
    speedup,
)
from kernelloop.evaluate.trusted.clock.interleave import Evidence, Session, run_timing
from kernelloop.evaluate.trusted.clock.interleave_types import OUTER_PHASES
from kernelloop.evaluate.trusted.clock.memory_plan import free_memory, plan_memory
from kernelloop.task import Shape, Task
from kernelloop.task.roofline import floor_on, precision_hint


def time_compiled_in_turn(
    rec: BenchmarkRecord,
    gate: Session,
    task: Task,
    baseline: Path,
    shapes: list[Shape],
    dtype: str,
    evidence: Evidence,
    say: Callable[[str], None],
) -> str:
    """Time the compiled slot beside `baseline` after the gate's session (`gate`: its
    settings, sandbox and limit are this one's) and fill each shape's `compiled_in_turn`
    and `speedup_vs_compiled`; '' when every shape was timed, else why not (the caller
    records it as the slot's `dropped`)."""
    device = gate.device
    ref_path = task.file_and_function("reference")[0]
    slots = {"baseline": baseline, COMPILED: ref_path}
    s = gate.s
    most = s.most_per_batch(device)
    plan = plan_memory(task, shapes, dtype, device, list(slots), [], free_memory(device), most)
    if plan.refused:
        return f"not timed in turn either: {plan.refused}"
    say(
        "timing the compiled slot in turn, beside the baseline alone (no room beside the "
        f"gate's slots); {plan.line()}"
    )
    out = run_timing(
        task,
        slots,
        shapes,
        dtype,
        device,
        settings=replace(s, profile=[], batch_caps=plan.caps()),
        sandbox=gate.sandbox,
        timeout_s=gate.timeout_s,
        say=say,
        candidate="baseline",
        reference="baseline",
        gpu=gate.gpu,
        evidence={COMPILED: evidence},
    )
    turn_s = sum(out.phases_s.get(k, 0.0) for k in OUTER_PHASES)
    rec.phases_s["compiled_in_turn"] = round(turn_s, 3)
    if rec.compiled is not None:
        rec.compiled.prepare_s = out.prepare_s.get(COMPILED, {})
    if out.problems:
        return "timed in turn, the baseline's session failed: " + "; ".join(
            q.text.strip().splitlines()[0][:200] for q in out.problems
        )
    if why := out.dropped.get(COMPILED):
        return f"timed in turn: {why}"
    return _fill(rec, out, _floors(rec, task, shapes, dtype))


def _floors(rec: BenchmarkRecord, task: Task, shapes: list[Shape], dtype: str) -> dict:
    """Shape -> (its memory floor in ms, the precision hint): the gate's floor rule
    (bench_fill.impl_timing) needs both to tell impossible from an algebraic rewrite."""
    if rec.device != "cuda":
        return {}
    got = {}
    for shape in shapes:
        floor = floor_on(task, shape, dtype, rec.device_name)
        got[shape.label] = (floor.memory_ms if floor else None, precision_hint(task, floor, dtype))
    return got


def _fill(rec: BenchmarkRecord, out, floors: dict) -> str:
    """Each shape's in-turn numbers under the same floor rule as beside the gate's slots:
    below the memory floor is not a number to show; below a compute floor only (the
    reference algorithm's: Inductor can rewrite it too) is shown with a review."""
    missing = []
    for sb in rec.shapes:
        got = out.shapes.get(sb.shape) or {}
        if "baseline" not in got or COMPILED not in got:
            missing.append(sb.shape)
            continue
        said, reviews = len(rec.warnings), []
        memory_ms, hint = floors.get(sb.shape, (None, ""))
        base, comp = (
            impl_timing(slot, got[slot], sb.floor_ms, rec.warnings, sb.shape, hint,
                        memory_ms=memory_ms, reviews=reviews)
            for slot in ("baseline", COMPILED)
        )  # fmt: skip
        if len(rec.warnings) > said:  # no samples, or below the floor: not a number to show
            missing.append(sb.shape)
            continue
        rec.warnings.extend(f"{r} (timed in turn)" for r in reviews)
        ratio, why = compiled_speedup(base, comp)
        if why:
            rec.warnings.append(f"{sb.shape} (in turn, the baseline against it): {why}")
        sb.compiled_in_turn = CompiledTurn(
            baseline_ms=base.median_ms, compiled_ms=comp.median_ms, baseline_vs_compiled=ratio
        )
        vs_base = speedup(sb, "baseline")
        sb.speedup_vs_compiled = vs_base * ratio if vs_base is not None else None
    if missing:
        return "timed in turn: no usable timing on " + ", ".join(missing)
    return ""
