"""`benchmark()`: the trusted side of a timing run, and the benchmark record it produces.

Every implementation — the candidate, the current best, the baseline, any `against` files
and an A/A copy of the best that measures the noise — runs in its own sandboxed worker;
the trusted side interleaves them (kernelloop.evaluate.trusted.interleave): one worker
times a batch while the others are stopped, in a secret shuffled order each round, on
inputs drawn from a fresh secret seed. Nothing a worker says is taken on trust:
- statistics are recomputed here from the raw intervals;
- every batch's reported time must fit in the wall time this process observed, and the
  candidate's claimed saving over the others must be one this process's clock saw;
- every implementation's timed output is judged against the float64 reference;
- a non-candidate worker's idle probes catch GPU work left running by another process;
- a median below the task's roofline floor (memory or compute) is impossible and rejected;
- clocks and throttle reasons are read with nvidia-smi around the run.
The gate (kernelloop.gate) refuses a candidate without this record, or with `problems`.

With `compiled=True` one more slot, "compiled", times the task's reference under
torch.compile (default mode, dynamic=False) in a worker of its own, beside the others:
the record then says how the candidate compares with torch.compile as well as with eager.
It is evidence only (interleave.Evidence): the gate never reads it, and a compile that
fails or runs past its budget drops it with a warning.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import COMPILED, aa_slot, quantiles
from kernelloop.evaluate.trusted import native_source
from kernelloop.evaluate.trusted.bench_record import (  # noqa: F401  (re-exported: bench.X is the public path)
    BenchmarkRecord,
    CompiledSlot,
    GpuState,
    ImplTiming,
    ShapeBench,
    noise,
    overall_speedup,
    paired_log_ratio,
    speedup,
)
from kernelloop.evaluate.trusted.gpu_bind import bound_to_gpu
from kernelloop.evaluate.trusted.interleave import (
    Evidence,
    Outcome,
    Settings,
    SlotResult,
    run_timing,
)
from kernelloop.evaluate.trusted.run import (
    as_judged,
    resolve_device,
    select_shapes,
    timings_count,
)
from kernelloop.evaluate.trusted.static import screen_candidate
from kernelloop.task import Shape, Task
from kernelloop.task.roofline import floor_on

FLOOR_MARGIN = 0.97  # a median below 97% of the floor is physically impossible, not fast
HIDDEN_WARN_FRACTION = 0.10  # warn when more calls than this left work outside the calling stream
# The compiled slot's first call (which compiles) and warm-up: at most this long on one
# shape and on all shapes together, and at most these shares of the benchmark's time limit
# (the limit is the candidate's: the compile must never be what runs into it).
COMPILE_BUDGET_S = (120.0, 0.2)
COMPILE_TOTAL_S = (300.0, 0.4)


@bound_to_gpu
def benchmark(
    task: Task,
    candidate: Path,
    *,
    best: Path | None = None,
    against: dict[str, Path] | None = None,
    device: str = "auto",
    shapes: str | None = None,
    dtype: str | None = None,
    sandbox: str = "auto",
    aa: bool = True,
    profile: bool = True,
    reps: int | None = None,
    max_s_per_shape: float | None = None,
    timeout_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    screen: bool = True,
    gpu: int | None = None,
    compiled: bool = False,
) -> BenchmarkRecord:
    """Time `candidate` against the best (if given) and the baseline on the task's shapes,
    every implementation on the same GPU `gpu` (nvidia-smi's index; None: GPU 0).

    The candidate goes through the same static screen as in `evaluate` (`screen=False` is
    for tests of the runtime defences): a refused source is never run, and its record
    carries the findings as problems, so the gate refuses it.

    `compiled`: also time the task's reference under torch.compile (the "compiled" slot,
    `compiled_evidence`), for the record's speedup over torch.compile; never the gate's."""
    say = progress or (lambda _m: None)
    # A C++/CUDA source file is timed as the module that builds it (native_source.py).
    module = native_source.as_module(task, Path(candidate))
    task = as_judged(task, module)
    device = resolve_device(device)
    dtype = dtype or task.spec.dtypes[0]
    if dtype not in task.spec.dtypes:
        raise KernelloopError(f"dtype {dtype!r} is not in the task; use one of {task.spec.dtypes}.")
    shape_list = select_shapes(task, device, shapes)
    impls: dict[str, Path] = {"candidate": module, "baseline": task.baseline_path}
    if best is not None:
        impls["best"] = Path(best)
    for name, path in (against or {}).items():
        if name in impls or "#" in name or name == COMPILED:
            raise KernelloopError(
                f"--against name {name!r} is taken; rename the file (names must be unique)."
            )
        impls[name] = Path(path)
    for name, path in impls.items():
        if not path.is_file():
            raise KernelloopError(
                f"{name} file {path} does not exist; pass the path of a .py file "
                f"(or, for a cuda task, a .cu/.cpp source)."
            )
    impls = {n: native_source.as_module(task, p) for n, p in impls.items()}  # --best, --against
    sources = {n: p.read_bytes() for n, p in impls.items()}
    limit = timeout_s or task.spec.rules.eval_timeout_s
    evidence = compiled_evidence(task, limit) if compiled else {}
    ref_path = task.file_and_function("reference")[0]
    best_name = "best" if "best" in impls else "baseline"
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    findings = (
        screen_candidate(
            sources["candidate"], task.spec.task.language, task.baseline_path.read_bytes()
        )
        if screen
        else []
    )
    interp = device == "cpu" and task.spec.task.language == "triton"
    gpu_before = read_gpu_state("before", gpu) if device == "cuda" else None
    outcome = Outcome()
    if findings:
        say(f"static screen refused the candidate: {findings[0].render()}")
    else:
        slots = dict(impls)
        if aa:
            slots[aa_slot(best_name)] = impls[best_name]
        slots.update({name: ref_path for name in evidence})
        settings = bench_settings(
            device, reps, max_s_per_shape, ["candidate", best_name] if profile else []
        )
        say(f"timing {len(slots)} slot(s) on {len(shape_list)} shape(s), one sandboxed worker each")
        outcome = run_timing(
            task,
            slots,
            shape_list,
            dtype,
            device,
            settings=settings,
            sandbox=sandbox,
            timeout_s=limit,
            say=say,
            gpu=gpu,
            evidence=evidence,
        )
    gpu_after = read_gpu_state("after", gpu) if device == "cuda" else None

    env = outcome.env
    rec = BenchmarkRecord(
        task=task.name,
        task_digest=task.digest(),
        language=task.spec.task.language,
        candidate=str(Path(candidate).resolve()),
        candidate_sha256=hashlib.sha256(sources["candidate"]).hexdigest(),
        impl_sha256={n: hashlib.sha256(b).hexdigest() for n, b in sources.items()}
        | ({COMPILED: hashlib.sha256(ref_path.read_bytes()).hexdigest()} if compiled else {}),
        best=best_name,
        started_at=started,
        wall_s=0.0,
        device=device,
        device_name=str(env.get("device_name") or platform.machine()),
        compute_capability=env.get("compute_capability"),
        driver=(gpu_before.raw.get("driver_version") if gpu_before else None),
        torch=str(env.get("torch") or torch.__version__),
        triton=env.get("triton"),
        cuda=env.get("cuda"),
        python=str(env.get("python") or platform.python_version()),
        sandbox=outcome.mode,
        interpreter=interp,
        gpu_state=[g for g in (gpu_before, gpu_after) if g is not None],
        aa_impl=best_name if aa else None,
        timings_count=timings_count(device, interp, task.spec.task.language),
        worker_log_tail=outcome.log_tail,
        timing_phase_s=outcome.timing_phase_s,
    )
    if findings:
        rec.static_findings = [f"static screen: {f.render()}" for f in findings]
        rec.problems.extend(rec.static_findings)
    else:
        rec.problems.extend(p.text for p in outcome.problems)
        rec.warnings.extend(outcome.warnings)
        fill_shapes(rec, task, shape_list, dtype, list(impls), outcome)
        _throttle_warnings(rec)
        if compiled:
            rec.compiled = _compiled_slot(task, evidence[COMPILED], rec, outcome)
    rec.speedup_vs_baseline = overall_speedup(rec, "baseline")
    rec.speedup_vs_compiled = overall_speedup(rec, COMPILED) if rec.compiled else None
    rec.wall_s = round(time.monotonic() - t0, 3)
    return rec


def compiled_evidence(task: Task, limit_s: float) -> dict[str, Evidence]:
    """The "compiled" slot: the task's reference — the trusted eager op, on every task (an
    imported KernelBench task's PyTorch baseline is the same Model) — wrapped by the
    worker with torch.compile (default mode, dynamic=False). A stochastic task's reference
    takes its randomness as a keep-mask; the worker draws it inside the compiled function
    (worker/compiled.py)."""
    _, func = task.file_and_function("reference")
    spec: dict = {"mode": None, "dynamic": False}
    if st := task.spec.stochastic:
        spec |= {
            "mask_param": st.mask_param,
            "rate_param": st.rate_param,
            "like": task.spec.task.output_like,
        }
    job = {"entry": func, "model_class": None, "compile": spec}
    budget = min(COMPILE_BUDGET_S[0], COMPILE_BUDGET_S[1] * limit_s)
    total = min(COMPILE_TOTAL_S[0], COMPILE_TOTAL_S[1] * limit_s)
    return {COMPILED: Evidence(job, budget_s=budget, total_s=total)}


def _compiled_slot(
    task: Task, ev: Evidence, rec: BenchmarkRecord, outcome: Outcome
) -> CompiledSlot:
    timed = [sb.shape for sb in rec.shapes if COMPILED in sb.impls]
    why = outcome.dropped.get(COMPILED, "")
    if not why and not rec.problems and len(timed) < len(rec.shapes):
        why = "no timing on " + ", ".join(s.shape for s in rec.shapes if s.shape not in timed)
    return CompiledSlot(
        source=task.spec.task.reference,
        shapes=timed,
        dropped=why,
        prepare_s=outcome.prepare_s.get(COMPILED, {}),
        budget_s=ev.budget_s,
        total_budget_s=ev.total_s,
    )


def bench_settings(
    device: str, reps: int | None, max_s: float | None, profile: list[str]
) -> Settings:
    """The benchmark's budget: on a GPU rounds until 0.6 s per shape (~110 rounds of ~5 ms
    on the largest flagship shape) and at most 400 calls per implementation; on a CPU
    single-threaded, until 0.8 s per shape and at most 200 calls."""
    return Settings(
        reps=reps or 400,
        cpu_reps=reps or 200,
        max_s_per_shape=max_s,
        profile=profile if device == "cuda" else [],
    )


def fill_shapes(
    rec: BenchmarkRecord,
    task: Task,
    shapes: list[Shape],
    dtype: str,
    impls: list[str],
    outcome: Outcome,
) -> None:
    slots = impls + ([aa_slot(rec.aa_impl)] if rec.aa_impl else [])
    evidence = [COMPILED]  # timed for the record where it was asked for; never missing
    methods = set()
    for shape in shapes:
        got = outcome.shapes.get(shape.label)
        if got is None:
            continue  # a problem stopped the run before this shape
        floor = floor_on(task, shape, dtype, rec.device_name) if rec.device == "cuda" else None
        floor_ms = floor.ms if floor else None
        sb = ShapeBench(
            shape=shape.label,
            dtype=dtype,
            weight=shape.weight,
            tag=shape.tag,
            floor_ms=floor_ms,
            floor_bound=floor.bound if floor else None,
            reported_s=outcome.reported_s.get(shape.label, 0.0),
            observed_s=outcome.observed_s.get(shape.label),
        )
        rec.shapes.append(sb)
        for slot in slots:
            if slot in got:
                sb.impls[slot] = _impl_timing(slot, got[slot], floor_ms, rec.problems, shape.label)
                methods.add(got[slot].method)
        for slot in evidence:
            if slot in got:  # its oddities are warnings: it is not the gate's to refuse on
                said = len(rec.warnings)
                it = _impl_timing(slot, got[slot], floor_ms, rec.warnings, shape.label)
                if len(rec.warnings) == said:  # no samples, or below the floor: left out
                    sb.impls[slot] = it
        sb.speedup_vs_compiled = speedup(sb, COMPILED)
        missing = [s for s in slots if s not in sb.impls]
        if missing and not rec.problems:
            rec.problems.append(f"{shape.label}: no timing for {', '.join(missing)}")
        sb.noise_rel, sb.aa_rel_diff = noise(sb, rec.best, rec.aa_impl)
        cand = sb.impls.get("candidate")
        # Every flagged call is timed device-wide either way; the warning is for a pattern.
        # Honest kernels on the H200 had 1-3% of calls flagged by host wake-up jitter.
        if cand is not None and cand.hidden_calls > max(2, HIDDEN_WARN_FRACTION * cand.n):
            rec.warnings.append(
                f"{shape.label}: {cand.hidden_calls} of {cand.n} candidate calls left work "
                "running outside "
                f"the calling stream; they were timed device-wide"
            )
    if not rec.shapes and not rec.problems:
        rec.problems.append("the benchmark produced no timings")
    rec.method = "; ".join(sorted(methods))


def _impl_timing(
    slot: str, r: SlotResult, floor_ms: float | None, problems: list[str], label: str
) -> ImplTiming:
    samples = [x for x in r.samples_ms if math.isfinite(x)]
    if not samples or min(samples) <= 0:
        problems.append(f"{label}: {slot} has no usable samples (empty or non-positive)")
        samples = samples or [float("nan")]
    med, p20, p80 = quantiles(samples)  # recomputed from the samples the trusted side derived
    it = ImplTiming(
        impl=slot,
        median_ms=med,
        p20_ms=p20,
        p80_ms=p80,
        n=len(samples),
        method=r.method[:200],
        hidden_calls=r.hidden_calls,
        profiler_ms=r.profiler_ms if r.profiler_ms and r.profiler_ms > 0 else None,
        pct_of_floor=100.0 * floor_ms / med if floor_ms and med > 0 else None,
        samples_ms=samples,
        round_size=r.round_size,
    )
    if floor_ms and med < FLOOR_MARGIN * floor_ms:
        problems.append(
            f"{label}: {slot} median {med:.4f} ms is below the roofline floor "
            f"{floor_ms:.4f} ms: impossible, so the timing is not real"
        )
    return it


_SMI_FIELDS = [
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks_throttle_reasons.active",
    "temperature.gpu",
    "power.draw",
]


def read_gpu_state(when: Literal["before", "after"], gpu: int | None = None) -> GpuState | None:
    """Clocks and throttle reasons of GPU `gpu` (None: the first) from nvidia-smi (None
    where it is missing)."""
    if not shutil.which("nvidia-smi"):
        return None
    # Newer drivers call the throttle field clocks_event_reasons; try both names.
    for fields in (
        _SMI_FIELDS,
        [f.replace("clocks_throttle_reasons", "clocks_event_reasons") for f in _SMI_FIELDS],
    ):
        try:
            r = subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
                + (["-i", str(gpu)] if gpu is not None else []),
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if r.returncode == 0 and r.stdout.strip():
            vals = [v.strip() for v in r.stdout.splitlines()[0].split(",")]
            raw = dict(zip(_SMI_FIELDS, vals, strict=False))
            return GpuState(
                when=when,
                sm_clock_mhz=_num(raw.get("clocks.sm")),
                mem_clock_mhz=_num(raw.get("clocks.mem")),
                throttle_reasons=raw.get("clocks_throttle_reasons.active"),
                temperature_c=_num(raw.get("temperature.gpu")),
                power_w=_num(raw.get("power.draw")),
                raw=raw,
            )
    return None


# Bits of nvidia-smi's throttle mask that do not slow a running kernel: GPU idle (0x1)
# and application clocks setting (0x2). Anything else (power cap 0x4, thermal 0x20/0x40,
# HW slowdown 0x8 …) during a benchmark is worth a reviewer's attention.
_BENIGN_THROTTLE = 0x1 | 0x2


def _throttle_warnings(rec: BenchmarkRecord) -> None:
    for g in rec.gpu_state:
        try:
            mask = int(g.throttle_reasons or "0", 16)
        except ValueError:
            continue
        if mask & ~_BENIGN_THROTTLE:
            rec.warnings.append(
                f"clocks throttled {g.when} the run (reasons {g.throttle_reasons}, SM "
                f"{g.sm_clock_mhz} MHz)"
            )


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None
