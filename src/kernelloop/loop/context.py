"""What an agent reads before it proposes: the `AgentContext` of a round, and the plain-
text view of the best's evaluation used where no profiler summary is available."""

from __future__ import annotations

from kernelloop.agents.base import AgentContext
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.run import select_shapes, timings_count
from kernelloop.evaluate.trusted.values.record import EvaluationRecord
from kernelloop.evaluate.trusted.values.undeclared import undeclared_ranges as unseen_ranges
from kernelloop.loop.state import Best, Run
from kernelloop.objective import floor_by_shape, floors
from kernelloop.policy import rules_text
from kernelloop.task import Task
from kernelloop.task.contract import Contract, Judging, render_contract
from kernelloop.task.native_source import entry_args


def agent_context(
    task: Task, digest: str, best: Best, r: int, last_round: int, run: Run | None = None
) -> AgentContext:
    """Round r's context: the best's source, profile and numbers (speedup, % of floor per
    shape), the task's contract as judged on the run's device, the history digest, the
    rules in words and the rounds left (this one included)."""
    spec = task.spec.task
    judging = judging_for(
        task,
        run.device if run else None,
        best,
        run.shapes if run else None,
        run.dtypes if run else None,
    )
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
        device_name=judging.device_name,
        best_objective=best.objective,
        best_pct_of_floor=floor_by_shape(best.shapes),
        profile_metrics={**compile_facts(best.record), **best.profile_metrics},
        contract=render_contract(task, judging).text(),
        # An unknown device (no run, no record) hides no numbers the best has.
        timings_count=judging.timings_count or not judging.device_name,
        parents=parent_choices(task, run, best),
        **native_fields(task),
    )


def parent_choices(task: Task, run: Run | None, best: Best) -> dict[str, str]:
    """The correct earlier candidates a proposal may start from, by id (the best too),
    each source once: an earlier row with the best's very source (an earlier run's
    baseline) is the best, not a second choice."""
    store = getattr(run, "store", None)
    if store is None:
        return {}
    found = {
        str(pid): src
        for pid, src in store.correct_sources(task.name).items()
        if src.strip() != best.source.strip()
    }
    return {**found, str(best.pid): best.source}


def native_fields(task: Task) -> dict:
    """The entry's parameters for C++ sources an agent writes (cuda tasks only)."""
    if task.spec.task.language != "cuda" or task.model_class():
        return {}
    try:
        params, names = entry_args(task)
    except KernelloopError:
        return {}
    return {"native_params": params, "native_names": tuple(names)}


def judging_for(
    task: Task,
    device: str | None,
    best: Best | None,
    shapes: str | None = None,
    dtypes: list[str] | None = None,
) -> Judging:
    """Where candidates are judged and the numbers the contract quotes: the device (from
    the best's evaluation record where there is one), whether its timings count, the
    shapes and dtypes judged, each GPU shape's floor time, and the best's per-shape row."""
    record = best.record if best else None
    env = record.environment if record else None
    device = device or (env.device if env else None)
    versions = {"torch": env.torch, "triton": env.triton or ""} if env else {}
    if device is None:
        return Judging(
            best_label=f"#{best.pid}" if best else "",
            unseen=unseen_ranges(task, task.spec.shapes or task.spec.cpu_shapes) or {},
            **versions,
        )
    language = task.spec.task.language
    interpreter = bool(env.interpreter) if env else device == "cpu" and language != "torch"
    device_name = env.device_name if env else _device_name(device)
    judged = select_shapes(task, device, shapes)
    dtypes = dtypes or list(task.spec.dtypes)
    fl = floors(task, dtypes, device, device_name)
    return Judging(
        device=device,
        device_name=device_name,
        timings_count=timings_count(device, interpreter, language),
        interpreter=interpreter,
        compute_capability=env.compute_capability if env else None,
        sm_count=_sm_count(device),
        shapes=tuple(s.label for s in judged),
        dtypes=tuple(dtypes),
        floor_device=fl.device,
        ceiling=fl.ceiling,
        floors=fl.by_shape,
        best_label=f"#{best.pid}" if best else "",
        best_objective=best.objective if best else None,
        best_rows=tuple(best.shapes) if best else (),
        unseen=unseen_ranges(task, judged) or {},
        **versions,
    )


def task_contract(
    task: Task,
    device: str | None,
    best: Best | None,
    shapes: str | None = None,
    dtypes: list[str] | None = None,
) -> Contract:
    """The contract as the MCP `task` tool and `kernelloop task show` give it."""
    return render_contract(task, judging_for(task, device, best, shapes, dtypes))


def _device_name(device: str) -> str:
    import platform

    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CUDA GPU"
    return platform.processor() or platform.machine()


def _sm_count(device: str) -> int | None:
    if device != "cuda":
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(0).multi_processor_count)


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
        line = k.describe()  # labelled by its specialization (dtypes, constexprs)
        if line in seen:
            continue
        seen.add(line)
        lines.append(line)
    for t in record.timings:
        if t.impl == "candidate":
            floor = f", {t.pct_of_floor:.1f}% of the roofline floor" if t.pct_of_floor else ""
            lines.append(
                f"Shape {t.shape} {t.dtype}: median {t.median_ms:.4f} ms "
                f"(p20–p80 {t.p20_ms:.4f}–{t.p80_ms:.4f}){floor}."
            )
    lines.append("Missing: hardware counters (Nsight Compute was not run for this summary).")
    return "\n".join(lines)
