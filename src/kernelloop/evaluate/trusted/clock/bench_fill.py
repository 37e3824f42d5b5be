"""The benchmark record's per-shape part, filled from the interleaved session's outcome:
each slot's samples summarised (recomputed here), the roofline check, the noise terms."""

from __future__ import annotations

import math

from kernelloop.evaluate.protocol import COMPILED, aa_slot, quantiles
from kernelloop.evaluate.trusted.clock.bench_record import (
    BenchmarkRecord,
    ImplTiming,
    ShapeBench,
    compiled_speedup,
    noise,
)
from kernelloop.evaluate.trusted.clock.interleave import Outcome, SlotResult
from kernelloop.evaluate.trusted.clock.timing_checks import BUSY
from kernelloop.task import Shape, Task
from kernelloop.task.roofline import floor_on, precision_hint

FLOOR_MARGIN = 0.97  # a median below 97% of the floor is physically impossible, not fast
HIDDEN_WARN_FRACTION = 0.10  # warn when more calls than this left work outside the calling stream


def fill_shapes(
    rec: BenchmarkRecord,
    task: Task,
    shapes: list[Shape],
    dtype: str,
    impls: list[str],
    outcome: Outcome,
) -> None:
    slots = impls + ([aa_slot(rec.aa_impl)] if rec.aa_impl else [])
    evidence = [COMPILED]  # timed for the record where it was asked for; never missing
    methods = set()
    for shape in shapes:
        got = outcome.shapes.get(shape.label)
        if got is None:
            continue  # a problem stopped the run before this shape
        floor = floor_on(task, shape, dtype, rec.device_name) if rec.device == "cuda" else None
        floor_ms = floor.ms if floor else None
        memory_ms = floor.memory_ms if floor else None
        hint = precision_hint(task, floor, dtype)
        sb = ShapeBench(
            shape=shape.label,
            dtype=dtype,
            weight=shape.weight,
            tag=shape.tag,
            floor_ms=floor_ms,
            floor_bound=floor.bound if floor else None,
            reported_s=outcome.reported_s.get(shape.label, 0.0),
            observed_s=outcome.observed_s.get(shape.label),
            clock=outcome.clock.get(shape.label),
        )
        rec.shapes.append(sb)
        for slot in slots:
            if slot in got:
                sb.impls[slot] = impl_timing(
                    slot, got[slot], floor_ms, rec.problems, shape.label, hint,
                    memory_ms=memory_ms, reviews=rec.warnings,
                )  # fmt: skip
                methods.add(got[slot].method)
        for slot in evidence:
            if slot in got:  # its oddities are warnings: it is not the gate's to refuse on
                said, reviews = len(rec.warnings), []
                it = impl_timing(
                    slot, got[slot], floor_ms, rec.warnings, shape.label, hint,
                    memory_ms=memory_ms, reviews=reviews,
                )  # fmt: skip
                if len(rec.warnings) == said:  # no samples, or below the floor: left out
                    sb.impls[slot] = it
                rec.warnings.extend(reviews)
        cand, comp = sb.impls.get("candidate"), sb.impls.get(COMPILED)
        if cand is not None and comp is not None:
            sb.speedup_vs_compiled, why = compiled_speedup(cand, comp)
            if why:
                rec.warnings.append(f"{shape.label}: {why}")
        missing = [s for s in slots if s not in sb.impls]
        if missing and not rec.problems:
            rec.problems.append(f"{shape.label}: no timing for {', '.join(missing)}")
        sb.noise_rel, sb.aa_rel_diff = noise(sb, rec.best, rec.aa_impl)
        if (said := aa_busy(sb)) and not rec.problems:
            rec.problems.append(said)
        cand = sb.impls.get("candidate")
        # Every flagged call is timed device-wide either way; the warning is for a pattern.
        # Honest kernels on the H200 had 1-3% of calls flagged by host wake-up jitter.
        if cand is not None and cand.hidden_calls > max(2, HIDDEN_WARN_FRACTION * cand.n):
            rec.warnings.append(
                f"{shape.label}: {cand.hidden_calls} of {cand.n} candidate calls left work "
                "running outside "
                f"the calling stream; they were timed device-wide"
            )
    if not rec.shapes and not rec.problems:
        rec.problems.append("the benchmark produced no timings")
    rec.method = "; ".join(sorted(methods))


# The same code timed in two slots of the same rounds (the A/A pair) this far apart means
# the machine's load, not the code, set the ratios: the record is refused as BUSY (an
# infrastructure fault, measured again), never read as a verdict. A/A on the H200: <= 1%;
# on a noisy 2-core runner with five paired rounds: 3-25% (2026-12-04).
AA_BUSY = 0.5


def aa_busy(sb: ShapeBench) -> str | None:
    """Why this shape's timings say nothing about the code (its A/A spread is beyond
    AA_BUSY), or None."""
    if sb.aa_rel_diff is None or sb.aa_rel_diff <= AA_BUSY:
        return None
    return (
        f"{sb.shape}: {BUSY}: the same implementation, timed in two slots of the same "
        f"rounds, measured {sb.aa_rel_diff:.0%} apart (A/A; more than {AA_BUSY:.0%} means the "
        "machine's load set the ratios); run again on a quieter machine"
    )


def impl_timing(
    slot: str,
    r: SlotResult,
    floor_ms: float | None,
    problems: list[str],
    label: str,
    hint: str = "",
    *,
    memory_ms: float | None = None,
    reviews: list[str] | None = None,
) -> ImplTiming:
    """One slot's timing on one shape. Below the floor that bounds any algorithm (the
    memory floor where `memory_ms` is given, else `floor_ms`) is impossible: a problem.
    Below a compute floor only (the reference algorithm's flops, `floor_ms` above
    `memory_ms`) is a review (into `reviews`): an algebraic rewrite can do fewer flops."""
    samples = [x for x in r.samples_ms if math.isfinite(x)]
    if not samples or min(samples) <= 0:
        problems.append(f"{label}: {slot} has no usable samples (empty or non-positive)")
        samples = samples or [float("nan")]
    med, p20, p80 = quantiles(samples)  # recomputed from the samples the trusted side derived
    it = ImplTiming(
        impl=slot,
        median_ms=med,
        p20_ms=p20,
        p80_ms=p80,
        n=len(samples),
        method=r.method[:200],
        hidden_calls=r.hidden_calls,
        profiler_ms=r.profiler_ms if r.profiler_ms and r.profiler_ms > 0 else None,
        pct_of_floor=100.0 * floor_ms / med if floor_ms and med > 0 else None,
        samples_ms=samples,
        round_size=r.round_size,
    )
    if why := below_floor(label, slot, med, floor_ms, hint, memory_ms):
        problems.append(why)
        it.pct_of_floor = None  # a % of floor over 100 is never shown
    elif said := beats_algorithm(label, slot, med, floor_ms, memory_ms, hint):
        (reviews if reviews is not None else problems).append(said)
        it.pct_of_floor = None
        it.floor_review = "precision" if hint else "algebra"
    return it


def beats_algorithm(
    label: str, slot: str, med: float, floor_ms: float | None, memory_ms: float | None, hint: str
) -> str:
    """'' unless `slot`'s median is below FLOOR_MARGIN of a compute floor (the flops of the
    reference's algorithm, `floor_ms`) but not of the memory floor: then a review, never a
    refusal. KernelBench level2/18's algebra removes its 137-GFLOP GEMM, and an honest
    kernel without it ran at 293% of that floor (H100, 2026-12-07, issue 46)."""
    if not floor_ms or memory_ms is None or floor_ms <= memory_ms or not med > 0:
        return ""
    if med >= FLOOR_MARGIN * floor_ms:
        return ""
    said = (
        f"{label}: {slot} median {med:.4f} ms is {100 * floor_ms / med:.0f}% of the reference "
        f"algorithm's compute floor {floor_ms:.4f} ms ({100 * memory_ms / med:.0f}% of the "
        f"memory floor {memory_ms:.4f} ms): it does fewer flops than the reference's "
        "algorithm (an algebraic rewrite?)"
    )
    if hint:
        said += (
            " or computes below float32 precision, which this task forbids: the gate holds "
            "its float32 error to PyTorch's own on the same inputs"
        )
    return said + " — review the kernel"


def below_floor(
    label: str,
    slot: str,
    med: float,
    floor_ms: float | None,
    hint: str = "",
    memory_ms: float | None = None,
) -> str:
    """'' unless `slot`'s median is below FLOOR_MARGIN of the floor no algorithm beats (the
    memory floor where `memory_ms` is given, else the roofline floor); then why that is
    impossible and what it means: for the candidate a timing that is not real (or a floor
    mistake), for a trusted implementation (the baseline, the compiled reference) a floor
    that is wrong — they cannot beat physics either."""
    if memory_ms is not None and floor_ms:
        floor_ms, hint = min(floor_ms, memory_ms), ""  # the bytes bound every algorithm
    if not floor_ms or not med > 0 or med >= FLOOR_MARGIN * floor_ms:
        return ""
    said = (
        f"{label}: {slot} median {med:.4f} ms is {100 * floor_ms / med:.0f}% of the roofline "
        f"floor {floor_ms:.4f} ms, which no kernel can beat"
    )
    if hint:  # a float32 compute floor the task's precision contract holds it to
        return f"{said} at full float32: {hint}"
    if slot == "candidate":
        return f"{said}: impossible, so the timing is not real (or the task's floor is wrong)"
    return (
        f"{said}: a trusted implementation beat it, so the task's floor is wrong — check "
        "[roofline] bytes and flops (each tensor's real dtype; the precision the task allows)"
    )
