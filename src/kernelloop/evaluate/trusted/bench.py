"""`benchmark()`: the trusted side of a timing run, and the benchmark record it produces.

Every implementation — the candidate, the current best, the baseline, any `against` files
and an A/A copy of the best that measures the noise — runs in its own sandboxed worker;
the trusted side interleaves them (kernelloop.evaluate.trusted.clock.interleave): one worker
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

from collections.abc import Callable
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import COMPILED, aa_slot
from kernelloop.evaluate.trusted.bench_pending import (  # noqa: F401  (re-exported)
    PendingBenchmark,
    out_of_memory,
)
from kernelloop.evaluate.trusted.clock.bench_fill import (  # noqa: F401  (re-exported)
    HIDDEN_WARN_FRACTION,
    fill_shapes,
)
from kernelloop.evaluate.trusted.clock.bench_record import (  # noqa: F401  (re-exported: bench.X is the public path)
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
from kernelloop.evaluate.trusted.clock.interleave import (
    Evidence,
    Session,
    Settings,
)
from kernelloop.evaluate.trusted.clock.memory_plan import free_memory, plan_memory
from kernelloop.evaluate.trusted.launch import native_source
from kernelloop.evaluate.trusted.launch.gpu_bind import bound_to_gpu, on_gpu
from kernelloop.evaluate.trusted.run import (
    as_judged,
    resolve_device,
    select_shapes,
)
from kernelloop.evaluate.trusted.screen.static import screen_candidate
from kernelloop.task import Task

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
    defer_turn: bool = False,
) -> PendingBenchmark:
    """`benchmark()`'s arguments checked and its session planned; `.run()` times.

    `head_start_s`: how long before `.run()` its workers may be started with `.spawn()`
    (each imports Python and torch and waits; no implementation is imported until
    `.run()`): the loop starts them while the candidate's correctness runs and calls
    `.cancel()` if it fails. Workers spawned longer ago are replaced by `.run()`.

    `defer_turn`: a compiled slot the memory plan leaves out is timed in turn only when
    `.finish_compiled(record)` is called (the loop: for a candidate the gate accepted —
    only a best's speedup over torch.compile is shown), not by `.run()`."""
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
    if "best" in sources and sources["best"] == sources["baseline"]:
        # The loop's best is the baseline until a candidate beats it: the same code in two
        # slots would cost a worker's memory and turns and measure nothing the A/A copy
        # does not (on the H200 a third 29 GiB worker refused level1/36 at its own size).
        del impls["best"], sources["best"]
        say("the best is the baseline itself (the same bytes): timed once, as the baseline")
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
        defer_turn=defer_turn,
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
        # Planned again when it runs (PendingBenchmark.replan): the loop starts a benchmark
        # while the candidate's correctness worker still holds memory of its own.
        settings = bench_settings(
            device, reps, max_s_per_shape, ["candidate", best_name] if profile else []
        )
        with on_gpu(gpu):
            free = free_memory(device)
        most = settings.most_per_batch(device)
        optional = [*evidence, aa_slot(best_name)]
        pending.memory = plan = plan_memory(
            task, shape_list, dtype, device, list(slots), optional, free, most
        )
        for name in plan.left_out:
            del slots[name]
        pending.aa_impl = best_name if aa_slot(best_name) in slots else None
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
