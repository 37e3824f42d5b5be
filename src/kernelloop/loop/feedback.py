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

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.loop.state import Best, Evaluated, Run
from kernelloop.profile.render import prompt_text
from kernelloop.task.textbudget import clip

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


def candidate_profile(
    run: Run, source: str, name: str, parent: Best, pid: int | None = None
) -> str:
    """The candidate's compile facts (sm_90, from its own Triton launches; no GPU needed)
    and, on a GPU, its profile against `parent` (Nsight Compute deltas where ncu runs), as
    lines for its feedback; one line saying why where the profiler could not run. The
    candidate runs in the same sandbox as its evaluation (profile/run.py). The compile
    facts come from every GPU shape of the task (a kernel may take another path, or spill,
    at one shape only): shapes with the same facts share a line, the line with the most
    spilled bytes first. With `pid`, a one-line summary of them is stored with the
    proposal for the history digest (`HistoryStore.digest`), so they outlive the round."""
    from kernelloop.profile.run import default_shape, profile_candidate

    path = Path(run.scratch) / f"{name}_profiled.py"
    path.write_text(source)
    heaviest = default_shape(run.task)
    others = tuple(s for s in run.task.spec.shapes if s.label != heaviest.label)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The other shapes' compile facts in one facts-only run (meta tensors, nothing
            # launched) beside the heaviest shape's profile.
            extra = pool.submit(_facts_at, run, source, name, others) if others else None
            outcome = profile_candidate(
                run.task,
                path,
                parent=parent.path if run.device == "cuda" and parent.path.is_file() else None,
                shape=heaviest.label,
                device=run.device,
                sandbox=run.sandbox,
                timeout_s=180.0,
            )
            facts = {heaviest.label: outcome.report.compile_facts}
            facts.update(extra.result() if extra is not None else {})
    except KernelloopError as e:
        return f"profile: not available ({clip(str(e), 200)})"
    finally:
        path.unlink(missing_ok=True)
    text = prompt_text(outcome.report)
    keep = [line for line in text.splitlines() if line.startswith(PROFILE_LINES)]
    lines = facts_by_shape(facts)
    if pid is not None and (short := facts_digest_line(facts)):
        run.store.add_profile(pid, short, {FACTS_KEY: short})
    rest = [line for line in keep if not line.startswith(FACT_LINES)]
    if rest:
        lines += [f"profile of this candidate at {outcome.shape} {outcome.dtype}:", *rest]
    return "\n".join(lines) or "profile: the profiler reported no kernel of this candidate"


FACT_LINES = ("Compile facts", "Theoretical occupancy")
FACTS_KEY = "compile_facts_line"  # the profiles row that holds a candidate's digest line


def _facts_at(run: Run, source: str, name: str, shapes: tuple) -> dict:
    """{shape label: compile facts} at `shapes`, from one sandboxed facts-only run (sm_90,
    any machine); {} where it cannot run (the heaviest shape's profile says why)."""
    from kernelloop.evaluate.trusted.screen.static import screen_source
    from kernelloop.profile.collect import collect

    if screen_source(source, run.task.spec.task.language):
        return {}  # never run what the screen refuses (the evaluation refused it too)
    dtype = (run.dtypes or run.task.spec.dtypes)[0]
    try:
        got = collect(
            run.task,
            source.encode(),
            name,
            shapes[0],
            dtype,
            device="cpu",
            sandbox=run.sandbox,
            timeout_s=180.0,
            more_shapes=shapes[1:],
        )
    except KernelloopError:
        return {}
    return {shapes[0].label: got.facts, **got.facts_by_shape}


def _fact(f) -> str:
    """One kernel's compile facts and the theoretical occupancy they allow, on one line."""
    consts = ", ".join(f"{k}={v}" for k, v in f.constexprs.items())
    occ = f.occupancy()
    where = f" ({consts})" if consts else ""
    text = (
        f"`{f.name}`{where} {f.n_regs} registers/thread, spills {f.spill_store_bytes} B "
        f"stored / {f.spill_load_bytes} B loaded, stack {f.stack_bytes} B, shared "
        f"{f.shared_bytes} B, {f.num_warps} warps"
    )
    if occ is not None:
        limit = f" (limited by {occ.limiter})" if occ.theoretical_pct < 99.5 else ""
        text += f", occupancy {occ.theoretical_pct:.0f}%{limit}"
    return text


def facts_by_shape(reports: dict) -> list[str]:
    """The compile facts of every kernel at every profiled shape, shapes with the same
    facts on one line, the line whose kernels spill the most bytes first (then the most
    registers): a path taken, or a spill, at one shape only is never hidden behind the
    heaviest shape's facts."""
    groups: dict[str, list[str]] = {}
    weight: dict[str, tuple[int, int]] = {}
    arch = ""
    for shape, kernels in reports.items():
        if not kernels:
            continue
        arch = kernels[0].arch
        line = "; ".join(_fact(f) for f in kernels)
        groups.setdefault(line, []).append(shape)
        spills = sum((f.spill_store_bytes or 0) + (f.stack_bytes or 0) for f in kernels)
        weight[line] = (spills, max((f.n_regs or 0) for f in kernels))
    if not groups:
        return []
    order = sorted(groups, key=lambda k: weight[k], reverse=True)
    which = "by shape, the most spills first" if len(order) > 1 else "the same at every shape"
    head = (
        f"Compile facts (Triton, {arch}) {which}; occupancy is theoretical (sm_90 limits: "
        "64K registers, 64 warps, 32 blocks, 228 KB shared per SM):"
    )
    return [head, *(f"- {', '.join(groups[k])}: {k}" for k in order)]


def facts_digest_line(reports: dict) -> str:
    """The compile facts in short for the history digest: per group of shapes with the
    same facts, each kernel's registers, spilled bytes and occupancy, the most spills first."""
    groups: dict[str, list[str]] = {}
    weight: dict[str, int] = {}
    for shape, kernels in reports.items():
        parts = []
        for f in kernels:
            occ = f.occupancy()
            spilled = (f.spill_store_bytes or 0) + (f.spill_load_bytes or 0)
            pct = f", {occ.theoretical_pct:.0f}% occupancy" if occ else ""
            parts.append(f"`{f.name}` {f.n_regs} regs, {spilled} B spilled{pct}")
        if parts:
            key = "; ".join(parts)
            groups.setdefault(key, []).append(shape)
            weight[key] = sum((f.spill_store_bytes or 0) for f in kernels)
    order = sorted(groups, key=lambda k: weight[k], reverse=True)
    return clip(" | ".join(f"{', '.join(groups[k])}: {k}" for k in order), 400)
