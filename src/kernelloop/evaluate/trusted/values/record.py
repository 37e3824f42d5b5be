"""The typed evaluation record: one per candidate and device, JSON-serializable.

Units are in field names. Everything here is computed on the trusted side or copied from
the worker and marked as worker-reported; nothing the worker says becomes a pass by itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Category = Literal[
    "accepted",
    "compile",
    "crash",
    "timeout",
    "wrong",
    "nonfinite",
    "trivial",
    "interface",
    "aliasing",
    "mutation",
    "stochastic",
    "nondeterministic",
    "stateful",
    "e2e",
    "static",
    "tamper",
    "deferred",
    "no_kernel",
    "timing",
    "protocol",
    "slower",
    "policy",
    "setup",
    # The trusted side's own failure (judge.Judge.internal_error): infrastructure, never
    # the candidate's; the loop evaluates it again (loop/evaluation.infrastructure_fault).
    "internal",
]

# Verdicts that are no finding about the candidate: the task's inputs or reference failed
# (`setup`) or the trusted side did (`internal`). `kernelloop evaluate` exits 2 on them and
# gate-check neither counts them as kills nor as false rejections.
NOT_THE_CANDIDATES: frozenset[str] = frozenset({"setup", "internal"})


class KernelInfo(BaseModel):
    """Compiler facts for one kernel of the candidate (where obtainable)."""

    name: str
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    launches: int | None = None
    source: Literal["triton-compile", "triton-cache", "profiler", "launch-hook"] = "triton-compile"
    # Worker-reported code facts (advisory): the specialization it was compiled for
    # (pointer dtypes, constexpr values), TTGIR layout conversions and shared-memory
    # allocations, and a PTX instruction mix.
    specialization: str | None = None
    convert_layouts: int | None = None
    shared_allocs: int | None = None
    ptx_mix: dict[str, int] | None = None

    def describe(self) -> str:
        """One line for an agent: the kernel, what it was specialized for, and its facts
        (the code facts are the worker's report, capped; advisory only)."""
        spec = f" [{self.specialization[:160]}]" if self.specialization else ""
        facts = [
            f"{self.n_regs} registers/thread",
            f"{self.n_spills} spills",
            f"{self.shared_bytes} B shared",
            f"{self.num_warps} warps",
        ]
        if self.convert_layouts is not None:
            facts.append(f"{self.convert_layouts} layout conversions (TTGIR convert_layout)")
        if self.shared_allocs is not None:
            facts.append(f"{self.shared_allocs} shared-memory allocations (TTGIR local_alloc)")
        if self.ptx_mix:
            top = sorted(self.ptx_mix.items(), key=lambda kv: -kv[1])[:6]
            facts.append("PTX mix " + ", ".join(f"{k[:24]} {v}" for k, v in top))
        return f"Kernel {self.name[:80]}{spec}: " + ", ".join(facts) + "."


class CheckResult(BaseModel):
    """One correctness check: a suite × case × shape × dtype."""

    suite: Literal[
        "random", "extreme", "stochastic", "interface", "determinism", "sensitivity", "e2e"
    ]
    case: str
    shape: str
    dtype: str
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # max |out - ref| / (atol + rtol·|ref|) over the output: the share of the tolerance the
    # candidate used (0.5: half of it; above 1 the check fails); None where not compared
    tol_used: float | None = None
    # The same share used by the task's own model in the judged dtype on the same inputs
    # (where the task measures it: `model_margin`); values/precision.py compares the two.
    own_tol_used: float | None = None
    worst_index: list[int] | None = None
    reason: str = ""


class TimingStats(BaseModel):
    """Per-shape timing of one implementation, measured in the worker (untrusted)."""

    impl: str
    shape: str
    dtype: str
    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int
    method: str
    floor_ms: float | None = None
    floor_bound: Literal["memory", "compute"] | None = Field(
        default=None, description="which roof the floor is (task/roofline.py)"
    )
    pct_of_floor: float | None = Field(default=None, description="floor time / median time × 100")


class StageTime(BaseModel):
    """One stage of an evaluation, cheapest first; the first failure ends the evaluation
    (the stages after it are `not run`). Seconds of wall-clock time on the trusted side:
    `start` is the sandbox and the worker's imports up to its first message; `compile`
    ends when the first call of every dtype is judged (the candidate's kernels compiled)."""

    name: Literal["static", "start", "compile", "smoke", "full", "e2e", "timing"]
    seconds: float = 0.0
    calls: int = 0
    status: Literal["passed", "failed", "stopped", "not run", "skipped"] = Field(
        default="passed",
        description="`stopped`: cut short by a failed check in a later stage that another "
        "worker reached first (several correctness workers); `not run`: never started",
    )
    judge_seconds: float = Field(
        default=0.0,
        description="of `seconds`, the trusted side's own work on this stage's calls: reading "
        "each output, regenerating its inputs, the float64 reference and the comparison",
    )
    failed_check: str | None = Field(
        default=None,
        description="a failed stage: the first check that failed in it, `<category> in "
        "<suite>` (a wrong output shape in the compile stage's first call is `interface in "
        "random`, not a compile error)",
    )


class Environment(BaseModel):
    device: Literal["cuda", "cpu"]
    device_name: str
    compute_capability: str | None = None
    driver: str | None = None
    torch: str
    triton: str | None = None
    cuda: str | None = None
    python: str
    sandbox: str
    interpreter: bool = False
    clocks: dict[str, str] = Field(default_factory=dict)


class Verdict(BaseModel):
    accepted: bool
    category: Category
    reasons: list[str] = Field(default_factory=list)
    judged_on: str = Field(
        default="",
        description="the shapes the correctness checks ran on: the declared ones and the "
        "undeclared ones drawn for this evaluation, or the declared ones only",
    )


class EvaluationRecord(BaseModel):
    task: str
    task_digest: str
    candidate: str
    candidate_sha256: str
    started_at: str
    wall_s: float
    environment: Environment
    kernels: list[KernelInfo] = Field(default_factory=list)
    kernel_launches_per_call: int | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    timings: list[TimingStats] = Field(default_factory=list)
    timings_count: bool = Field(
        default=False,
        description="False for interpreter/CPU-emulated timings: never used to accept a speedup",
    )
    worker_log_tail: str = ""
    warnings: list[str] = Field(default_factory=list)
    stages: list[StageTime] = Field(
        default_factory=list, description="each stage's time, in the order they ran"
    )
    verdict: Verdict

    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def suites_passed(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for c in self.checks:
            out[c.suite] = out.get(c.suite, True) and c.passed
        return out
