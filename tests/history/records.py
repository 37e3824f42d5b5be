"""Building realistic evaluation records for the history tests (no GPU needed)."""

from __future__ import annotations

from kernelloop.evaluate.trusted.values.record import (
    CheckResult,
    Environment,
    EvaluationRecord,
    KernelInfo,
    TimingStats,
    Verdict,
)

SHAPES = ["16384x8192", "16384x8000", "4096x8000", "65536x1024", "1024x32768"]


def make_record(
    accepted: bool = True,
    category: str = "accepted",
    reasons: tuple[str, ...] = (),
    speedups: dict[str, float] | None = None,
    candidate: str = "candidate.py",
) -> EvaluationRecord:
    speedups = speedups or {s: 1.0 for s in SHAPES}
    timings = []
    for shape, sp in speedups.items():
        base = 0.5
        timings.append(
            TimingStats(
                impl="baseline",
                shape=shape,
                dtype="bfloat16",
                median_ms=base,
                p20_ms=base * 0.99,
                p80_ms=base * 1.01,
                n=50,
                method="cuda-graph",
            )
        )
        timings.append(
            TimingStats(
                impl="candidate",
                shape=shape,
                dtype="bfloat16",
                median_ms=base / sp,
                p20_ms=base / sp * 0.99,
                p80_ms=base / sp * 1.01,
                n=50,
                method="cuda-graph",
            )
        )
    checks = [
        CheckResult(
            suite="random",
            case="normal",
            shape=s,
            dtype="bfloat16",
            passed=True,
            max_abs_err=1e-3,
            max_rel_err=4e-3,
        )
        for s in speedups
    ]
    checks.append(
        CheckResult(
            suite="extreme",
            case="near_overflow",
            shape=SHAPES[0],
            dtype="bfloat16",
            passed=category != "wrong",
            reason="" if category != "wrong" else "max rel err 0.9",
        )
    )
    return EvaluationRecord(
        task="ln_softmax_dropout",
        task_digest="0123abcd",
        candidate=candidate,
        candidate_sha256="f" * 64,
        started_at="2026-11-02T10:00:00Z",
        wall_s=41.5,
        environment=Environment(
            device="cuda",
            device_name="NVIDIA H200",
            compute_capability="9.0",
            driver="570.86",
            torch="2.13.0",
            triton="3.6.0",
            cuda="12.8",
            python="3.11.9",
            sandbox="bwrap",
        ),
        kernels=[
            KernelInfo(
                name="_fused_ln_softmax_dropout", n_regs=96, n_spills=0, shared_bytes=0, num_warps=8
            )
        ],
        kernel_launches_per_call=1,
        checks=checks,
        timings=timings,
        timings_count=True,
        verdict=Verdict(accepted=accepted, category=category, reasons=list(reasons)),
    )
