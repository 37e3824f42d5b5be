"""The gate: correctness record + benchmark record + policy → accept or reject, with reasons.

No record, no merge: a candidate without a passing correctness record *and* a clean
benchmark record for the same bytes is rejected. The performance part:
- objective: the weighted geometric mean of per-shape speedups over the current best
  (each the median over rounds of the paired best/candidate time ratio), weighted by
  the task's shape distribution;
- the gain must beat max(min_gain, noise_k × noise), where noise comes from the A/A
  slot and the samples' spread (kernelloop.evaluate.trusted.bench.noise);
- no shape may be slower than the best by more than max_shape_regression;
- long-tail shapes may not fall below long_tail_floor × the baseline's speed ("rather
  5% slower on common shapes than 3× slower on the tail");
- on a GPU, the profiler's kernel durations (a second, independent timer) must agree
  that the candidate is faster; disagreement beyond the noise is flagged.
Timings that do not count (Triton's interpreter) never accept a speedup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

from kernelloop.evaluate.trusted.bench import BenchmarkRecord, speedup
from kernelloop.evaluate.trusted.values.precision import below_precision
from kernelloop.evaluate.trusted.values.record import EvaluationRecord
from kernelloop.objective import geomean
from kernelloop.policy.decisions import PolicyDecision
from kernelloop.task.spec import Rules

TIMER_DISAGREEMENT = (
    0.05  # relative, on top of k × noise: timers differ (15% seen on one H200 GEMM)
)


class ShapeGate(BaseModel):
    shape: str
    tag: str
    weight: float
    speedup_vs_best: float | None = None
    speedup_vs_baseline: float | None = None
    profiler_speedup_vs_best: float | None = None
    noise_rel: float = 0.0
    pct_of_floor: float | None = None
    flags: list[str] = Field(default_factory=list)


class GateResult(BaseModel):
    """The verdict. category: accepted | policy | static (the static screen refused the
    source; nothing ran) | no_record | <correctness category> | timing (unusable or
    non-counting timings) | slower (no gain, regression, tail floor)."""

    accepted: bool
    category: str
    reasons: list[str] = Field(default_factory=list)
    objective: float | None = Field(
        default=None, description="weighted geomean speedup over the best"
    )
    required_gain: float | None = None
    noise_rel: float | None = None
    shapes: list[ShapeGate] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def decide(
    correctness: EvaluationRecord | None,
    bench: BenchmarkRecord | None,
    rules: Rules,
    policy: Sequence[PolicyDecision] = (),
) -> GateResult:
    """The combined verdict for one candidate (exit code 0 iff `accepted`)."""
    refused = [d for d in policy if not d.allowed]
    if refused:
        return GateResult(
            accepted=False, category="policy", reasons=[f"{d.rule}: {d.reason}" for d in refused]
        )
    if correctness is None:
        return _no("no_record", "no correctness record: nothing merges without one")
    if not correctness.verdict.accepted:
        return GateResult(
            accepted=False,
            category=correctness.verdict.category,
            reasons=list(correctness.verdict.reasons) or ["the correctness evaluation rejected it"],
        )
    if bench is None:
        return _no("no_record", "no benchmark record: no record, no merge")
    if bench.candidate_sha256 != correctness.candidate_sha256:
        return _no(
            "no_record",
            "the benchmark record is for different bytes than the correctness record; "
            "benchmark the candidate that was checked",
        )
    if bench.task_digest != correctness.task_digest:
        return _no(
            "no_record",
            "the benchmark and correctness records come from different versions of the task",
        )
    # Faster than float32 arithmetic allows for the reference's algorithm: a rewrite of the
    # algebra passes on (a review in the warnings); float32 error far past PyTorch's own
    # on the same inputs is the precision the task forbids (values/precision.py).
    beaten = [
        sb.shape
        for sb in bench.shapes
        if (c := sb.impls.get("candidate")) is not None and c.floor_review == "precision"
    ]
    if why := below_precision(beaten, correctness.checks):
        return _no("wrong", why)
    return performance_gate(bench, rules)


def performance_gate(bench: BenchmarkRecord, rules: Rules) -> GateResult:
    """Accept only a measured, noise-beating, distribution-wide gain over the best."""
    if bench.static_findings:  # refused before anything ran: not a timing failure
        return _no("static", *bench.static_findings)
    if bench.infrastructure:  # nobody's candidate's doing (bench.out_of_memory)
        return _no("internal", *bench.infrastructure)
    if bench.problems:
        return _no("timing", *bench.problems)
    if not bench.timings_count:
        return _no(
            "timing",
            f"timings on {bench.device} "
            f"({'Triton interpreter' if bench.interpreter else bench.method}) never accept a "
            "speedup; benchmark on a GPU",
        )
    shapes, missing = _per_shape(bench)
    if missing:
        return _no("timing", *missing)
    res = GateResult(accepted=False, category="slower", shapes=shapes)
    wsum = sum(s.weight for s in shapes)
    res.objective = geomean((s.weight, s.speedup_vs_best) for s in shapes)
    # Independent log-errors average down with the weights.
    res.noise_rel = math.sqrt(sum((s.weight * s.noise_rel) ** 2 for s in shapes)) / wsum
    res.required_gain = max(rules.min_gain, rules.noise_k * res.noise_rel)
    vs = "the best" if bench.best != "baseline" else "the baseline"
    if res.objective < 1.0 + res.required_gain:
        res.reasons.append(
            f"weighted geomean speedup {res.objective:.4f}x over {vs} does not beat the required "
            f"{1 + res.required_gain:.4f}x (max(min_gain {rules.min_gain:.1%}, {rules.noise_k:g} x "
            f"noise {res.noise_rel:.2%}))"
        )
    for s in shapes:
        if s.speedup_vs_best < 1.0 - rules.max_shape_regression:
            res.reasons.append(
                f"{s.shape}: {1 - s.speedup_vs_best:.1%} slower than {vs} "
                f"(limit {rules.max_shape_regression:.0%} per shape)"
            )
        if s.tag == "long_tail" and s.speedup_vs_baseline < rules.long_tail_floor:
            res.reasons.append(
                f"{s.shape} (long tail): {s.speedup_vs_baseline:.2f}x the baseline's speed, "
                f"below the floor {rules.long_tail_floor:.2f}x"
            )
    _second_timer(bench, res, rules)
    res.warnings += aa_warnings(bench)
    res.accepted = not res.reasons
    res.category = "accepted" if res.accepted else "slower"
    return res


def _per_shape(bench: BenchmarkRecord) -> tuple[list[ShapeGate], list[str]]:
    shapes, missing = [], []
    for sb in bench.shapes:
        cand, best, base = (sb.impls.get(n) for n in ("candidate", bench.best, "baseline"))
        if cand is None or best is None or base is None:
            missing.append(f"{sb.shape}: the record lacks candidate, best or baseline timings")
            continue
        g = ShapeGate(
            shape=sb.shape,
            tag=sb.tag,
            weight=sb.weight,
            noise_rel=sb.noise_rel,
            speedup_vs_best=speedup(sb, bench.best),
            speedup_vs_baseline=speedup(sb, "baseline"),
            pct_of_floor=cand.pct_of_floor,
        )
        if cand.profiler_ms and best.profiler_ms:
            g.profiler_speedup_vs_best = best.profiler_ms / cand.profiler_ms
        shapes.append(g)
    if not bench.shapes:
        missing.append("the benchmark record has no shapes")
    return shapes, missing


def _second_timer(bench: BenchmarkRecord, res: GateResult, rules: Rules) -> None:
    """Re-measure of a would-be winner with the profiler's kernel durations (GPU only)."""
    if bench.device != "cuda":
        return
    if any(s.profiler_speedup_vs_best is None for s in res.shapes):
        res.warnings.append("second timer (profiler kernel durations) unavailable on some shapes")
        return
    for s in res.shapes:
        gap = abs(math.log(s.profiler_speedup_vs_best / s.speedup_vs_best))
        if gap > max(rules.noise_k * s.noise_rel, TIMER_DISAGREEMENT):
            s.flags.append("timers disagree")
            res.warnings.append(
                f"{s.shape}: events say {s.speedup_vs_best:.3f}x, profiler kernel durations "
                f"{s.profiler_speedup_vs_best:.3f}x: the timers disagree beyond the noise; the "
                "gate used the events (what a call costs its caller, the host's gaps between "
                "its launches included; the profiler sums kernel time only) and the profiler "
                "only to confirm a gain"
            )
    prof_obj = geomean((s.weight, s.profiler_speedup_vs_best) for s in res.shapes)
    if (
        prof_obj is not None
        and prof_obj <= 1.0
        and res.objective is not None
        and res.objective > 1.0
    ):
        res.reasons.append(
            f"the second timer does not confirm the gain: profiler kernel durations give "
            f"{prof_obj:.4f}x over the best"
        )


# The A/A pair (the best timed in two slots of the same rounds) this far apart on a shape is
# said on its row: the noise bar already takes it in, but a reader should know the shape's
# ratios carry it (issue 46: 21% on a short multi-launch kernel, said nowhere). Beyond
# bench_fill.AA_BUSY the record is refused as a busy machine instead.
AA_WARN = 0.05


def aa_warnings(bench: BenchmarkRecord) -> list[str]:
    return [
        f"{sb.shape}: the A/A pair (the same code timed in two slots of the same rounds) "
        f"differs by {sb.aa_rel_diff:.1%}, above {AA_WARN:.0%}: this shape's ratios carry "
        "that much noise (the gate's noise bar includes it)"
        for sb in bench.shapes
        if sb.aa_rel_diff is not None and sb.aa_rel_diff > AA_WARN
    ]


def _no(category: str, *reasons: str) -> GateResult:
    return GateResult(accepted=False, category=category, reasons=list(reasons)[:20])
