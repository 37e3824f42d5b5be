"""What an agent reads before it proposes: the `AgentContext` of a round, and the plain-
text view of the best's evaluation used where no profiler summary is available."""

from __future__ import annotations

from kernelloop.agents.base import AgentContext
from kernelloop.evaluate.trusted.record import EvaluationRecord
from kernelloop.loop.state import Best
from kernelloop.objective import floor_by_shape
from kernelloop.policy import rules_text
from kernelloop.task import Task


def agent_context(task: Task, digest: str, best: Best, r: int, last_round: int) -> AgentContext:
    """Round r's context: the best's source, profile and numbers (speedup, % of floor per
    shape), the history digest, the rules in words and the rounds left."""
    spec = task.spec.task
    return AgentContext(
        task_name=task.name,
        task_description=spec.description,
        language=spec.language,
        entry=spec.entry,
        best_source=best.source,
        best_id=str(best.pid),
        profile_summary=best.profile_text or context_profile(best.record),
        history_digest=digest,
        rules_text=rules_text(task.spec.rules, spec.entry),
        round_index=r,
        rounds_left=last_round - r + 1,
        tunables=tuple(spec.tunables),
        device_name=best.record.environment.device_name if best.record else "",
        best_objective=best.objective,
        best_pct_of_floor=floor_by_shape(best.shapes),
        profile_metrics={**compile_facts(best.record), **best.profile_metrics},
    )


def compile_facts(record: EvaluationRecord | None) -> dict[str, float | str]:
    """The compiler's facts of the best's heaviest kernel (most registers), under the
    profile's metric names, for rule-driven agents where the profiler gave none: the
    tuner prunes its sweep by registers, spills and shared memory."""
    kernels = [k for k in (record.kernels if record else []) if k.n_regs is not None]
    if not kernels:
        return {}
    k = max(kernels, key=lambda k: k.n_regs or 0)
    facts: dict[str, float | str] = {"registers_per_thread": float(k.n_regs or 0)}
    if k.n_spills is not None:
        facts["spills"] = float(k.n_spills)
    if k.shared_bytes is not None:
        facts["shared_bytes"] = float(max(x.shared_bytes or 0 for x in kernels))
    return facts


def context_profile(record: EvaluationRecord | None) -> str:
    """A compact plain-text view of the best's evaluation for the agent's prompt.

    Used when no profiler summary is available: compile facts, timings, floor distance.
    """
    if record is None:
        return "No profile available yet (resumed run): evaluate the best again to see its numbers."
    env = record.environment
    counted = "count" if record.timings_count else "are interpreter timings and do not count"
    lines = [f"Device: {env.device_name} ({env.device}); timings {counted}."]
    lines.append(f"Kernel launches per call: {record.kernel_launches_per_call}.")
    seen = set()
    for k in record.kernels:
        key = (k.name, k.n_regs, k.n_spills, k.num_warps)
        if key in seen:
            continue
        seen.add(key)
        lines.append(
            f"Kernel {k.name}: {k.n_regs} registers/thread, {k.n_spills} spills, "
            f"{k.shared_bytes} B shared, {k.num_warps} warps."
        )
    for t in record.timings:
        if t.impl == "candidate":
            floor = f", {t.pct_of_floor:.1f}% of the roofline floor" if t.pct_of_floor else ""
            lines.append(
                f"Shape {t.shape} {t.dtype}: median {t.median_ms:.4f} ms "
                f"(p20–p80 {t.p20_ms:.4f}–{t.p80_ms:.4f}){floor}."
            )
    lines.append("Missing: hardware counters (Nsight Compute was not run for this summary).")
    return "\n".join(lines)
