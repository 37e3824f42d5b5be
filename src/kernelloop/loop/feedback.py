"""What the agent is told about each of its evaluated candidates (`Agent.observe`), in a
form it can act on next round: for a rejection, the first failing check with its input
case, shape, dtype and worst element (index, expected, got — compare.py puts them in the
reason); for a compile error, the compiler's first lines (the judge's `compile` reason,
text.compiler_lines; anything else it raised is the exception's last line); for a
measured candidate, the per-shape ratios against the best it was timed beside.

The text is built from the trusted records only (the verdict, its checks, the gate).
"""

from __future__ import annotations

from kernelloop.loop.state import Evaluated

# Reasons after the first that are worth a line: a second failing case often tells a
# rounding problem (one dtype) from a logic one (all of them).
MORE_REASONS = 2
MAX_KERNELS = 3  # compiled specializations listed per candidate


def outcome_text(word: str, reasons: list[str], ev: Evaluated, best_label: str) -> str:
    """`word` ("accepted" / "rejected") and the reasons the gate or judge gave, with the
    actionable detail of `ev` (the evaluation of the candidate against best `best_label`)."""
    record, gate = ev.record, ev.gate
    lines = [f"{word}: {reasons[0] if reasons else 'no reason recorded'}"]
    if record is not None and gate is None and not record.verdict.accepted:
        failed = record.failed_checks()
        total = len(record.checks)
        category = record.verdict.category
        lines = [f"{word} [{category}]: first failing check: {reasons[0] if reasons else '?'}"]
        if failed:
            lines.append(f"{len(failed)} of {total} checks failed.")
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
