"""evaluate()'s timing of a candidate that passed: a first look, not the gate's benchmark
(`kernelloop bench`): the candidate, the baseline and any named implementations, each in
its own sandboxed timing worker, few rounds, no A/A slot, no second timer. Whatever the
timing finds against the candidate rejects it; a time below the roofline floor is a cheat
or a floor mistake, never a percentage."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernelloop.evaluate.trusted.clock.bench_fill import beats_algorithm, below_floor
from kernelloop.evaluate.trusted.clock.interleave import Settings, run_timing
from kernelloop.evaluate.trusted.run_record import _timing, _Verdict
from kernelloop.evaluate.trusted.values.precision import below_precision
from kernelloop.evaluate.trusted.values.record import CheckResult, TimingStats
from kernelloop.task import Shape, Task
from kernelloop.task.roofline import floor_on, precision_hint

EVAL_TIMING = Settings(reps=50, min_reps=10, cpu_reps=3, cpu_min_reps=3, max_s_per_shape=2.0)


def first_look(
    task: Task,
    candidate: Path,
    against: dict[str, Path] | None,
    shape_list: list[Shape],
    dtype: str,
    device: str,
    verdict: _Verdict,
    *,
    device_name: str,
    sandbox: str,
    timeout_s: float | None,
    say,
    gpu: int | None,
    checks: Sequence[CheckResult] = (),
) -> list[TimingStats]:
    """The timings of a passing candidate; problems and times below the floor go into
    `verdict` (the candidate's as rejections, the others' as warnings)."""
    say("timing the candidate and the baseline, one sandboxed worker each")
    outcome = run_timing(
        task,
        {"candidate": candidate, "baseline": task.baseline_path, **(against or {})},
        shape_list,
        dtype,
        device,
        settings=EVAL_TIMING,
        sandbox=sandbox,
        timeout_s=timeout_s or task.spec.rules.eval_timeout_s,
        say=say,
        gpu=gpu,
    )
    for p in outcome.problems:
        if p.slot == "candidate":
            verdict.reject(p.category, p.text)
        else:
            verdict.warnings.append(f"timing: {p.text}")
    verdict.warnings.extend(outcome.warnings)
    timings = [
        _timing(task, shape, slot, r, dtype, device_name)
        for shape in shape_list
        for slot, r in outcome.shapes.get(shape.label, {}).items()
    ]
    beaten: list[str] = []  # shapes where the candidate beat its float32 compute floor
    for t in timings:  # a time below the floor is a cheat or a floor mistake, never a %
        shape = next(s for s in shape_list if s.label == t.shape)
        floor = floor_on(task, shape, dtype, device_name)
        hint = precision_hint(task, floor, dtype)
        memory_ms = floor.memory_ms if floor else None
        if why := below_floor(t.shape, t.impl, t.median_ms, t.floor_ms, hint, memory_ms):
            t.pct_of_floor = None
            if t.impl == "candidate":
                verdict.reject("timing", why)
            else:
                verdict.warnings.append(f"timing: {why}")
        elif why := beats_algorithm(t.shape, t.impl, t.median_ms, t.floor_ms, memory_ms, hint):
            t.pct_of_floor = None  # an algebraic rewrite, or the precision checked below
            verdict.warnings.append(f"timing: {why}")
            if t.impl == "candidate" and hint:
                beaten.append(t.shape)
    if why := below_precision(beaten, checks):
        verdict.reject("wrong", why)
    return timings
