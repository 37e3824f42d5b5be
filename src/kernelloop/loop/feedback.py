"""What the agent is told about each of its evaluated candidates (`Agent.observe`), in a
form it can act on next round: for a rejection, the first failing check with its input
case, shape, dtype and worst element (index, expected, got — compare.py puts them in the
reason); for a compile error, the compiler's first lines (the judge's `compile` reason,
text.compiler_lines; anything else it raised is the exception's last line); for a
measured candidate, the per-shape ratios against the best it was timed beside; for every
candidate that compiled, its own compile facts (registers, spills, occupancy for sm_90,
computed without a GPU too) and, on a GPU, its profile deltas against its parent
(`candidate_profile`).

The text is built from the trusted records only (the verdict, its checks, the gate).
"""

from __future__ import annotations

from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.loop.state import Best, Evaluated, Run
from kernelloop.profile.render import prompt_text

# Reasons after the first that are worth a line: a second failing case often tells a
# rounding problem (one dtype) from a logic one (all of them).
MORE_REASONS = 2
MAX_KERNELS = 3  # compiled specializations listed per candidate


def outcome_text(word: str, reasons: list[str], ev: Evaluated, best_label: str) -> str:
    """`word` (the outcome, history/models.outcome_word's vocabulary: "accepted",
    "rejected [wrong]", "correct, not timed", …) and the reasons the gate or judge gave,
    with the actionable detail of `ev` (the evaluation of the candidate against best
    `best_label`)."""
    record, gate = ev.record, ev.gate
    lines = [f"{word}: {reasons[0] if reasons else 'no reason recorded'}"]
    if record is not None and gate is None and not record.verdict.accepted:
        failed = record.failed_checks()
        total = len(record.checks)
        lines = [f"{word}: first failing check: {reasons[0] if reasons else '?'}"]
        if failed:
            lines.append(f"{len(failed)} of the {total} checks that ran failed.{never_ran(record)}")
        lines += [f"also: {r}" for r in reasons[1 : 1 + MORE_REASONS]]
        return "\n".join(lines)
    lines += [f"also: {r}" for r in reasons[1 : 1 + MORE_REASONS]]
    if record is not None and record.kernels:
        # The candidate's own compile facts (GPU only), not just the best's.
        kernels = list(dict.fromkeys(k.describe() for k in record.kernels))
        lines.append("compiled (worker-reported): " + " ".join(kernels[:MAX_KERNELS]))
        if len(kernels) > MAX_KERNELS:
            lines[-1] += f" (+{len(kernels) - MAX_KERNELS} more specializations)"
    if gate is not None:
        ratios = [f"{s.shape} {s.speedup_vs_best:.3f}x" for s in gate.shapes if s.speedup_vs_best]
        if ratios:
            lines.append(f"per shape vs the best {best_label} (>1 = faster): " + ", ".join(ratios))
        if gate.objective is not None:
            need = f" (needed > {1 + gate.required_gain:.4f}x)" if gate.required_gain else ""
            lines.append(f"weighted geomean vs the best: {gate.objective:.4f}x{need}")
    return "\n".join(lines)


def never_ran(record) -> str:
    """' Never ran: smoke, full, e2e (…)' for the stages an evaluation did not reach (it
    stops at its first failing stage), so "2 of 11 checks" is not read as the whole suite."""
    skipped = [s.name for s in record.stages if s.status == "not run"]
    if not skipped:
        return ""
    return f" Never ran: {', '.join(skipped)} (an evaluation stops at the first stage that fails)."


# Lines of a profile summary (profile/render.py) worth a candidate's feedback: its compile
# facts, occupancy, kernel timings and the moves against its parent; the roofline and the
# "Missing" list are the best's profile's business.
PROFILE_LINES = (
    "Compile facts",
    "Theoretical occupancy",
    "Kernel timings",
    "Vs parent",
    "REGRESSIONS",
    "Kernel ",  # Nsight Compute: each kernel's time and bound, then its resources
    "Resources",
    "Occupancy",
)
PROFILED_CATEGORIES = frozenset(
    {
        "accepted",
        "wrong",
        "nonfinite",
        "trivial",
        "stochastic",
        "nondeterministic",
        "stateful",
        "timing",
    }
)


def wants_profile(run: Run, ev: Evaluated) -> bool:
    """Profile a candidate for its feedback when the agent reads feedback text (a model:
    `candidate_profiles`) and the candidate compiled and ran: a compile error or a crash
    has nothing to count. Never in a run started with --no-profile."""
    if not run.profile or not getattr(run.agent, "candidate_profiles", False):
        return False
    if ev.record is None:
        return False
    return ev.record.verdict.category in PROFILED_CATEGORIES or ev.record.verdict.accepted


def candidate_profile(run: Run, source: str, name: str, parent: Best) -> str:
    """The candidate's compile facts (sm_90, from its own Triton launches; no GPU needed)
    and, on a GPU, its profile against `parent` (Nsight Compute deltas where ncu runs), as
    lines for its feedback; one line saying why where the profiler could not run. The
    candidate runs in the same sandbox as its evaluation (profile/run.py)."""
    from kernelloop.profile.run import profile_candidate

    path = Path(run.scratch) / f"{name}_profiled.py"
    path.write_text(source)
    try:
        outcome = profile_candidate(
            run.task,
            path,
            parent=parent.path if run.device == "cuda" and parent.path.is_file() else None,
            device=run.device,
            sandbox=run.sandbox,
            timeout_s=180.0,
        )
    except KernelloopError as e:
        return f"profile: not available ({str(e)[:200]})"
    finally:
        path.unlink(missing_ok=True)
    text = prompt_text(outcome.report)
    keep = [line for line in text.splitlines() if line.startswith(PROFILE_LINES)]
    if not keep:
        return "profile: the profiler reported no kernel of this candidate"
    where = f"{outcome.shape} {outcome.dtype}"
    return f"profile of this candidate at {where}:\n" + "\n".join(keep)
