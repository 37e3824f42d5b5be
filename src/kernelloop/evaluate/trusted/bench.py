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
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import COMPILED, aa_slot
from kernelloop.evaluate.trusted import native_source
from kernelloop.evaluate.trusted.bench_fill import (  # noqa: F401  (re-exported)
    HIDDEN_WARN_FRACTION,
    fill_shapes,
)
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
from kernelloop.evaluate.trusted.gpu_bind import bound_to_gpu, on_gpu
from kernelloop.evaluate.trusted.gpu_state import read_gpu_state, throttle_warnings
from kernelloop.evaluate.trusted.interleave import (
    Evidence,
    Outcome,
    Session,
    Settings,
)
from kernelloop.evaluate.trusted.memory_plan import MemoryPlan, free_memory, plan_memory
from kernelloop.evaluate.trusted.run import (
    as_judged,
    resolve_device,
    select_shapes,
    timings_count,
)
from kernelloop.evaluate.trusted.static import screen_candidate
from kernelloop.task import Shape, Task

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
    return start_benchmark(
        task,
        candidate,
        best=best,
        against=against,
        device=device,
        shapes=shapes,
        dtype=dtype,
        sandbox=sandbox,
        aa=aa,
        profile=profile,
        reps=reps,
        max_s_per_shape=max_s_per_shape,
        timeout_s=timeout_s,
        progress=progress,
        screen=screen,
        gpu=gpu,
        compiled=compiled,
    ).run()


def start_benchmark(
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
    head_start_s: float = 0.0,
) -> PendingBenchmark:
    """`benchmark()`'s arguments checked and its session planned; `.run()` times.

    `head_start_s`: how long before `.run()` its workers may be started with `.spawn()`
    (each imports Python and torch and waits; no implementation is imported until
    `.run()`): the loop starts them while the candidate's correctness runs and calls
    `.cancel()` if it fails. Workers spawned longer ago are replaced by `.run()`."""
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
    evidence = compiled_evidence(task, limit, dtype) if compiled else {}
    ref_path = task.file_and_function("reference")[0]
    best_name = "best" if "best" in impls else "baseline"
    findings = (
        screen_candidate(
            sources["candidate"],
            task.spec.task.language,
            task.baseline_path.read_bytes(),
            task.draws(),
        )
        if screen
        else []
    )
    pending = PendingBenchmark(
        task=task,
        candidate=Path(candidate),
        impls=impls,
        sources=sources,
        findings=findings,
        shapes=shape_list,
        dtype=dtype,
        device=device,
        gpu=gpu,
        best=best_name,
        aa_impl=best_name if aa else None,
        compiled=compiled,
        evidence=evidence,
        say=say,
    )
    if not findings:
        slots = dict(impls)
        if aa:
            slots[aa_slot(best_name)] = impls[best_name]
        slots.update({name: ref_path for name in evidence})
        # Before any worker allocates: what fits side by side (memory_plan.py). The
        # compiled slot (evidence) goes first, then the A/A copy (the gate's noise then
        # comes from the paired comparison alone); nothing else is the plan's to leave out.
        with on_gpu(gpu):
            free = free_memory(device)
        pending.memory = plan = plan_memory(
            task, shape_list, dtype, device, list(slots), [*evidence, aa_slot(best_name)], free
        )
        say(plan.line())
        if plan.refused:
            return pending
        for name in plan.left_out:
            del slots[name]
        pending.aa_impl = best_name if aa_slot(best_name) in slots else None
        settings = bench_settings(
            device, reps, max_s_per_shape, ["candidate", best_name] if profile else []
        )
        settings.batch_caps = plan.caps()
        pending.session = Session(
            task,
            slots,
            shape_list,
            dtype,
            device,
            settings,
            sandbox,
            limit,
            say,
            "candidate",
            "baseline",
            gpu,
            {k: v for k, v in evidence.items() if k in slots},
            head_s=head_start_s,
        )
    return pending


@dataclass
class PendingBenchmark:
    """A planned benchmark (`start_benchmark`), its workers perhaps already starting."""

    task: Task
    candidate: Path  # as given (a C++ source stays named as the user named it)
    impls: dict[str, Path]
    sources: dict[str, bytes]
    findings: list
    shapes: list[Shape]
    dtype: str
    device: str
    gpu: int | None
    best: str  # the slot the candidate must beat: "best", else "baseline"
    aa_impl: str | None
    compiled: bool
    evidence: dict[str, Evidence]
    say: Callable[[str], None]
    session: Session | None = None
    memory: MemoryPlan | None = None
    done: bool = False

    def spawn(self) -> None:
        """Start the workers' processes now (`Session.spawn`, ~0.1-0.2 s for four); nothing
        for a candidate the static screen refused. Called on the thread that will `run`
        it: a sandboxed worker dies with the thread that started it (PR_SET_PDEATHSIG
        follows the creating thread), so never from a short-lived one. Never raises (it
        runs inside the correctness judge's loop, where an exception would read as the
        candidate's): a failed start is undone and `run` starts the workers again, where
        an error is reported as always."""
        if self.session is not None and not self.done:
            try:
                self.session.spawn()
            except Exception:  # noqa: BLE001 - run() tries again and reports
                self.session.reset()

    def cancel(self) -> None:
        """End the workers of a benchmark that will not run (idempotent)."""
        self.done = True
        if self.session is not None:
            self.session.cancel()

    def run(self) -> BenchmarkRecord:
        if self.done:
            raise KernelloopError("this benchmark was already run or cancelled; start another.")
        self.done = True
        with on_gpu(self.gpu):
            return self._run()

    def _run(self) -> BenchmarkRecord:
        task, device, gpu, say = self.task, self.device, self.gpu, self.say
        started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        t0 = time.monotonic()
        interp = device == "cpu" and task.spec.task.language == "triton"
        gpu_before = read_gpu_state("before", gpu) if device == "cuda" else None
        outcome = Outcome()
        if self.findings:
            say(f"static screen refused the candidate: {self.findings[0].render()}")
        elif self.session is None:
            assert self.memory is not None and self.memory.refused  # nothing fits: not timed
        else:
            n = len(self.session.slot_files)
            say(f"timing {n} slot(s) on {len(self.shapes)} shape(s), one sandboxed worker each")
            outcome = self.session.run()
        gpu_after = read_gpu_state("after", gpu) if device == "cuda" else None

        env = outcome.env
        if self.compiled:
            ref_path = task.file_and_function("reference")[0]
            compiled_sha = {COMPILED: hashlib.sha256(ref_path.read_bytes()).hexdigest()}
        else:
            compiled_sha = {}
        rec = BenchmarkRecord(
            task=task.name,
            task_digest=task.digest(),
            language=task.spec.task.language,
            candidate=str(self.candidate.resolve()),
            candidate_sha256=hashlib.sha256(self.sources["candidate"]).hexdigest(),
            impl_sha256={n: hashlib.sha256(b).hexdigest() for n, b in self.sources.items()}
            | compiled_sha,
            best=self.best,
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
            aa_impl=self.aa_impl,
            timings_count=timings_count(device, interp, task.spec.task.language),
            worker_log_tail=outcome.log_tail,
            timing_phase_s=outcome.timing_phase_s,
            phases_s=outcome.phases_s,
            memory=self.memory,
        )
        if self.findings:
            rec.static_findings = [f"static screen: {f.render()}" for f in self.findings]
            rec.problems.extend(rec.static_findings)
        elif self.memory is not None and self.memory.refused:
            rec.infrastructure.append(f"memory: {self.memory.refused}")
        else:
            for name in self.memory.left_out if self.memory else []:
                why = f"left out by the memory plan so the gate's slots fit ({self.memory.line()})"
                outcome.dropped.setdefault(name, why)
                rec.warnings.append(f"{name} slot {why}")
            for p in outcome.problems:
                if oom := out_of_memory(p.slot, p.text):
                    rec.infrastructure.append(oom)
                else:
                    rec.problems.append(p.text)
            rec.warnings.extend(outcome.warnings)
            fill_shapes(rec, task, self.shapes, self.dtype, list(self.impls), outcome)
            throttle_warnings(rec)
            if self.compiled:
                rec.compiled = _compiled_slot(task, self.evidence[COMPILED], rec, outcome)
        rec.speedup_vs_baseline = overall_speedup(rec, "baseline")
        rec.speedup_vs_compiled = overall_speedup(rec, COMPILED) if rec.compiled else None
        rec.wall_s = round(time.monotonic() - t0, 3)
        return rec


def out_of_memory(slot: str, text: str) -> str:
    """'' unless `text` says a trusted implementation (the baseline, the best, the compiled
    reference) or the trusted side ran out of GPU memory; then one sentence that says it is
    infrastructure. On the H200 KernelBench level1/93 and level1/47 at their own sizes
    printed "PERFORMANCE GATE: FAIL (timing): … baseline: torch.OutOfMemoryError … 8.00
    GiB", which read as the candidate's fault (issue 34). The candidate's own OOM stays
    its failure."""
    if slot == "candidate" or not ("OutOfMemoryError" in text or "out of memory" in text):
        return ""
    who = "the trusted side" if slot in ("", "trusted") else f"the {slot}"
    return (
        f"{who} ran out of GPU memory ({text.strip().splitlines()[0][:160]}): infrastructure, "
        "not the candidate's failure — free GPU memory or time fewer or smaller shapes "
        "(--shapes), then benchmark again"
    )


def compiled_evidence(task: Task, limit_s: float, dtype: str = "") -> dict[str, Evidence]:
    """The "compiled" slot: the task's reference — the trusted eager op, on every task (an
    imported KernelBench task's PyTorch baseline is the same Model) — wrapped by the
    worker with torch.compile (default mode, dynamic=False). A stochastic task's reference
    takes its randomness as a keep-mask; the worker draws it inside the compiled function
    (worker/compiled.py). Each shape's first compiled call is checked against eager within
    twice the dtype's tolerance (each is held to one tolerance of the truth)."""
    _, func = task.file_and_function("reference")
    spec: dict = {"mode": None, "dynamic": False}
    if tol := task.spec.tolerances.get(dtype):
        spec |= {"atol": 2 * tol.atol, "rtol": 2 * tol.rtol}
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
        recompiles=1 if "recompiled during a timed call" in why else 0,
        eager_checked=task.spec.stochastic is None,
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
