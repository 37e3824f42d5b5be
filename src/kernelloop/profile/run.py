"""`profile_candidate()`: profile a candidate (and its parent) in the sandbox and summarize it.

With a CUDA GPU and Nsight Compute: ncu runs inside the sandbox around the profile
worker, which makes one call of the candidate inside the NVTX range; the CSV is parsed on
this (trusted) side. Without them, the worker records the candidate's Triton launches at
the profiled shape and compiles each for sm_90 (registers, spills, shared memory), and on
a GPU times one call with torch.profiler; the summary says what is missing.

The candidate runs exactly as in `evaluate`: the static screen first (a refused source is
never run: ScreenRefused), then the same sandbox. Each sandboxed run gets a fresh work dir
(what one run planted there never meets the next), everything read back from it goes
through profile/untrusted.py (no symlinks, no FIFOs, a size cap) and every piece of text
that reaches the agent is cleaned and cut. Nothing the worker reports can raise here.

A profile is advice for the agent and the reviewer, never evidence for the gate: the
candidate runs in the same sandbox as the report file and could alter it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.screen.static import Finding, screen_source
from kernelloop.profile.collect import Collected, collect
from kernelloop.profile.roofline import from_task_ceiling
from kernelloop.profile.summary import ProfileReport, summarize
from kernelloop.task import Shape, Task
from kernelloop.task.adhoc import shapes_from
from kernelloop.task.roofline import ceiling_for, flops_kind, reference_ceiling


class ScreenRefused(KernelloopError):
    """The static screen refused a source: it was not profiled (nothing ran)."""

    def __init__(self, role: str, path: Path, findings: list[Finding]) -> None:
        self.role, self.path, self.findings = role, path, findings
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        super().__init__(
            f"REJECTED at the static screen (policy): {path.name}: {findings[0].render()}{more}; "
            f"it was not profiled: fix the finding (docs/evaluate.md, 'Static screen')."
        )


@dataclass
class ProfileOutcome:
    report: ProfileReport
    parent: ProfileReport | None
    shape: str
    dtype: str
    wall_s: float


def default_shape(task: Task) -> Shape:
    """The GPU shape that carries the most weight (the first on a tie)."""
    return max(task.spec.shapes, key=lambda s: s.weight)


def profile_candidate(
    task: Task,
    candidate: Path,
    *,
    parent: Path | None = None,
    shape: str | None = None,
    dtype: str | None = None,
    device: str = "auto",
    sandbox: str = "auto",
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> ProfileOutcome:
    from kernelloop.evaluate.trusted.run import resolve_device

    say = progress or (lambda _m: None)
    t0 = time.monotonic()
    device = resolve_device(device)
    the_shape = shapes_from(task, shape)[0] if shape else default_shape(task)
    the_dtype = dtype or task.spec.dtypes[0]
    if the_dtype not in task.spec.dtypes:
        raise KernelloopError(
            f"dtype {the_dtype!r} is not in the task; use one of {task.spec.dtypes}."
        )
    files = {
        "candidate": Path(candidate).resolve(),
        **({"parent": Path(parent).resolve()} if parent else {}),
    }
    for p in files.values():
        if not p.is_file():
            raise KernelloopError(f"{p} does not exist; pass the path of a candidate .py file.")
    sources = {
        role: p.read_bytes() for role, p in files.items()
    }  # exactly these bytes are screened and run
    for role, data in sources.items():
        findings = screen_source(data.decode(errors="replace"), task.spec.task.language)
        if findings:
            raise ScreenRefused(role, files[role], findings)
    min_bytes = task.min_bytes(the_shape, the_dtype)
    min_flops = task.min_flops(the_shape, the_dtype)

    def gather(role: str) -> Collected:
        return collect(
            task,
            sources[role],
            files[role].name,
            the_shape,
            the_dtype,
            device=device,
            sandbox=sandbox,
            timeout_s=timeout_s,
        )

    say(f"profiling {' and '.join(files)} at {the_shape.label} {the_dtype}")
    if device == "cuda":
        # One at a time: two processes sharing the GPU would disturb each other's counters.
        got = {role: gather(role) for role in files}
    else:
        # Compile facts only: the two workers are independent (about halves the wall time).
        with ThreadPoolExecutor(max_workers=len(files)) as pool:
            got = dict(zip(files, pool.map(gather, files), strict=True))

    flop_kind = flops_kind(task, the_dtype)

    def report_for(role: str, parent_report: ProfileReport | None) -> ProfileReport:
        g = got[role]
        # The task's ceilings on the profiled GPU (the reference GPU's on a CPU or a GPU the
        # peak table lacks), as the evaluation's floor; no compute floor without a peak rate.
        ceiling = ceiling_for(g.device_name or "", task.spec.roofline.peaks)
        ceiling = ceiling or reference_ceiling(task)
        ceil_kw = {}
        flops = min_flops
        if ceiling is not None:
            ceil_kw = {"ceilings": from_task_ceiling(ceiling), "flop_kind": flop_kind}
            flops = min_flops if flop_kind in ceiling.flops_per_s else 0.0
        return summarize(
            g.kernels,
            parent=parent_report,
            min_bytes=min_bytes,
            min_flops=flops,
            **ceil_kw,
            compile_facts=g.facts,
            timings=g.timings,
            missing=g.missing,
            candidate=files[role].name,
            device=g.device_name,
        )

    parent_report = report_for("parent", None) if parent else None
    report = report_for("candidate", parent_report)
    return ProfileOutcome(
        report=report,
        parent=parent_report,
        shape=the_shape.label,
        dtype=the_dtype,
        wall_s=time.monotonic() - t0,
    )
