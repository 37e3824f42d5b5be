"""`kernelloop import kernelbench DIR --check`: a self-survey of imported problems (issue 46).

Every imported problem's own baseline, checked as the tool will use it: judged correct by
the judge (it must pass its own checks), every region of its output informative, and on a
GPU timed against its A/A copy at the problem's size — the A/A pair within AA_MAX, the
events within TIMERS_MAX of the profiler's kernel durations, its time above the roofline
floor, and the benchmark's memory plan fitting (no out-of-memory of a trusted slot). One
row per problem with the checks that failed and why, written to `survey.json` beside the
task folders. On a CPU the timing checks are "not run" (Triton tasks' CPU timings never
count): the CPU survey is the judge's half.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kernelloop.task import Task

AA_MAX = 0.01  # the baseline against its own copy, in the same rounds
TIMERS_MAX = 0.05  # events against the profiler's summed kernel durations


@dataclass
class SurveyRow:
    problem: str
    task: str
    passed: bool = False
    checks: dict[str, str] = field(default_factory=dict)  # check -> "ok", "not run: …", why
    seconds: float = 0.0

    def line(self) -> str:
        bad = [f"{k}: {v}" for k, v in self.checks.items() if v != "ok" and not _skipped(v)]
        return "passed every check" if self.passed else "; ".join(bad)


def _skipped(v: str) -> bool:
    return v.startswith("not run")


def survey_task(task: Task, problem: str, device: str, say=lambda _m: None) -> SurveyRow:
    """Every check of one imported problem's baseline (module docstring)."""
    from kernelloop.evaluate.trusted.values.regions import report_line

    t0 = time.monotonic()
    row = SurveyRow(problem=problem, task=task.name)
    row.checks["judged"] = _judged(task, device, say)
    weak = report_line(task, "cpu")
    row.checks["regions"] = "ok" if not weak else weak
    row.checks.update(_timed(task, device, say) if device == "cuda" else _not_timed(device))
    row.passed = all(v == "ok" or _skipped(v) for v in row.checks.values())
    row.seconds = round(time.monotonic() - t0, 1)
    return row


def _judged(task: Task, device: str, say) -> str:
    from kernelloop.evaluate.trusted.run import evaluate

    rec = evaluate(task, task.baseline_path, device=device, timing=False, progress=say)
    if rec.verdict.accepted:
        return "ok"
    first = rec.verdict.reasons[0] if rec.verdict.reasons else "no reason given"
    return f"{rec.verdict.category}: {first}"


TIMING_CHECKS = ("memory plan", "A/A", "events vs profiler", "floor")


def _not_timed(device: str) -> dict[str, str]:
    return {k: f"not run: timed on a GPU only (this survey ran on {device})" for k in TIMING_CHECKS}


def _timed(task: Task, device: str, say) -> dict[str, str]:
    from kernelloop.evaluate.trusted.bench import benchmark

    rec = benchmark(task, task.baseline_path, device=device, aa=True, profile=True, progress=say)
    out: dict[str, str] = {}
    if rec.infrastructure:
        out["memory plan"] = rec.infrastructure[0]
        return {**out, **{k: "not run: the benchmark did not fit" for k in TIMING_CHECKS[1:]}}
    out["memory plan"] = "ok"
    if rec.problems:
        return {**out, **{k: f"not run: {rec.problems[0]}" for k in TIMING_CHECKS[1:]}}
    out.update(timing_checks(rec))
    return out


def timing_checks(rec) -> dict[str, str]:
    """The A/A, timers and floor checks of a benchmark of the baseline against its copy."""
    aa, timers, floor = [], [], []
    for sb in rec.shapes:
        base = sb.impls.get("candidate") or sb.impls.get("baseline")
        if sb.aa_rel_diff is not None and sb.aa_rel_diff > AA_MAX:
            aa.append(f"{sb.shape} {sb.aa_rel_diff:.1%} apart (at most {AA_MAX:.0%})")
        if base is not None and base.profiler_ms and base.median_ms > 0:
            gap = abs(math.log(base.median_ms / base.profiler_ms))
            if gap > TIMERS_MAX:
                timers.append(
                    f"{sb.shape} events {base.median_ms:.4f} ms, profiler "
                    f"{base.profiler_ms:.4f} ms (at most {TIMERS_MAX:.0%} apart)"
                )
        elif base is not None:
            timers.append(f"{sb.shape} no profiler time")
        if sb.floor_ms is None:
            floor.append(f"{sb.shape} no floor (unknown GPU peaks)")
        elif base is not None and base.median_ms < sb.floor_ms:
            floor.append(f"{sb.shape} {base.median_ms:.4f} ms below the floor {sb.floor_ms:.4f} ms")
    said = {"A/A": aa, "events vs profiler": timers, "floor": floor}
    return {k: "; ".join(v) if v else "ok" for k, v in said.items()}


def write_survey(out: Path, rows: list[SurveyRow], device: str, device_name: str) -> Path:
    """survey.json beside the task folders: the machine, versions and one row a problem."""
    import torch

    from kernelloop import __version__

    passed = sum(r.passed for r in rows)
    doc = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": device,
        "device_name": device_name,
        "kernelloop": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "passed": passed,
        "problems": len(rows),
        "rows": [asdict(r) | {"line": r.line()} for r in rows],
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "survey.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path
