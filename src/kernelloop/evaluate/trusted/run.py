"""`evaluate()`: one candidate, one device, one verdict with reasons.

The trusted process never imports the candidate. It plans the calls, starts a fresh
sandboxed worker, judges every output from the bytes the worker wrote, and decides.
Missing results, crashes, timeouts and protocol violations are rejections. The calls run
in stages, cheapest first (`stages.py`), and the worker is stopped at the first failed
check. Only a candidate that passed is timed, and never in the correctness worker: the
candidate and the baseline each get their own timing worker
(kernelloop.evaluate.trusted.clock.interleave).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.clock.memory_plan import beyond_int32
from kernelloop.evaluate.trusted.launch import native_source, prestart
from kernelloop.evaluate.trusted.launch.gpu_bind import bound_to_gpu
from kernelloop.evaluate.trusted.launch.worker_count import default_workers
from kernelloop.evaluate.trusted.run_first_look import first_look
from kernelloop.evaluate.trusted.run_record import (
    _environment,
    _log_tail,
    _process_verdict,
    _screened_out,
    _Verdict,
    interpreter_note,
)
from kernelloop.evaluate.trusted.run_workers import judge_in_workers
from kernelloop.evaluate.trusted.screen.static import screen_candidate
from kernelloop.evaluate.trusted.values import shards, undeclared
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.oom import release_cached_gpu_memory
from kernelloop.evaluate.trusted.values.plan import Plan, Seeds, count_kernels, plan_calls
from kernelloop.evaluate.trusted.values.record import (
    EvaluationRecord,
    KernelInfo,
    TimingStats,
    Verdict,
)
from kernelloop.evaluate.trusted.values.refcache import References
from kernelloop.evaluate.trusted.values.stages import StageClock
from kernelloop.sandbox import detect_mode
from kernelloop.task import Shape, Task, files
from kernelloop.task.adhoc import shapes_from

Progress = Callable[[str], None]


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise KernelloopError(
            "--device cuda was asked for but no CUDA GPU is visible; use --device cpu or auto."
        )
    if device not in ("cuda", "cpu"):
        raise KernelloopError(f"unknown device {device!r}; use auto, cuda or cpu.")
    return device


def select_shapes(task: Task, device: str, selection: str | None) -> list[Shape]:
    if not selection:
        return task.shapes_for(device)
    if selection == "gpu":
        return list(task.spec.shapes)
    if selection == "cpu":
        return list(task.spec.cpu_shapes)
    if selection == "all":
        return [*task.spec.cpu_shapes, *task.spec.shapes]
    return shapes_from(task, selection)  # the task's labels, or ad-hoc sizes (task/adhoc.py)


@bound_to_gpu
def evaluate(
    task: Task,
    candidate: Path,
    *,
    device: str = "auto",
    shapes: str | None = None,
    dtypes: list[str] | None = None,
    against: dict[str, Path] | None = None,
    timing: bool | None = None,
    sandbox: str = "auto",
    timeout_s: float | None = None,
    progress: Progress | None = None,
    screen: bool = True,
    seeds: Seeds | None = None,
    references: References | None = None,
    workers: int | None = None,
    gpu: int | None = None,
    on_passed: dict[str, Callable[[], None]] | None = None,
    prestarted: bool = False,
) -> EvaluationRecord:
    """`timing`: None times a passing candidate only where timings count (never under the
    Triton interpreter, `timings_count`); True always, False never. `seeds`: the round's
    secret seeds (default: fresh for this evaluation). `references`: the round's
    reference cache (refcache.py; its seeds are the plan's, and `seeds` must then be None).
    `workers`: correctness workers the calls are split between (shards.py; default
    `default_workers`). `screen=False` skips the static screen (tests use it to prove the
    runtime defences). `gpu`: the GPU (nvidia-smi's index) the workers and the trusted
    side's torch work use (None: GPU 0 for the workers, torch's current device here).
    `on_passed`: {stage: called once when that stage has passed} (`stages.ORDER`; never
    after a failed check): the loop starts the benchmark's workers when `smoke` has
    passed (`PendingBenchmark.spawn`). Called on the judging thread: it must be quick and
    must not raise. `prestarted`: use the correctness workers this thread started before
    the candidate existed (`prestart.warm`), where their settings match."""
    device = resolve_device(device)
    # A C++/CUDA source file is judged as the module that builds it (native_source.py).
    candidate = native_source.as_module(task, candidate)
    against = {k: native_source.as_module(task, v) for k, v in (against or {}).items()} or None
    task = as_judged(task, candidate)
    threads = torch.get_num_threads()
    if device == "cpu":
        # The judge's float64 references are small on the CPU, and the workers keep every
        # core busy: torch's intra-op threads only wait on each other there (a 2x8200
        # softmax took 16 ms with 2 threads beside two workers, 0.2 ms with one).
        torch.set_num_threads(1)
    try:
        return _evaluate(
            task,
            candidate,
            device=device,
            shapes=shapes,
            dtypes=dtypes,
            against=against,
            timing=timing,
            sandbox=sandbox,
            timeout_s=timeout_s,
            progress=progress,
            screen=screen,
            seeds=seeds,
            references=references,
            workers=workers,
            gpu=gpu,
            on_passed=on_passed,
            prestarted=prestarted,
        )
    finally:
        torch.set_num_threads(threads)
        release_cached_gpu_memory()


def _evaluate(
    task: Task,
    candidate: Path,
    *,
    device: str,
    shapes: str | None,
    dtypes: list[str] | None,
    against: dict[str, Path] | None,
    timing: bool | None,
    sandbox: str,
    timeout_s: float | None,
    progress: Progress | None,
    screen: bool,
    seeds: Seeds | None,
    references: References | None,
    workers: int | None,
    gpu: int | None,
    on_passed: dict[str, Callable[[], None]] | None,
    prestarted: bool,
) -> EvaluationRecord:
    say = progress or (lambda _m: None)
    candidate = Path(candidate).resolve()
    if not candidate.is_file():
        raise KernelloopError(f"candidate {candidate} does not exist; pass the path of a .py file.")
    source = candidate.read_bytes()
    shape_list = select_shapes(task, device, shapes)
    dtype_list = dtypes or list(task.spec.dtypes)
    bad = [d for d in dtype_list if d not in task.spec.dtypes]
    if bad:
        raise KernelloopError(
            f"dtype(s) {bad} are not in the task; use some of {task.spec.dtypes}."
        )
    if references is not None and seeds is not None and seeds is not references.seeds:
        raise KernelloopError("evaluate: pass a round's seeds or its references, not both.")
    # Without a round's cache, one for this evaluation: the calls that share inputs (a
    # determinism pair, a stochastic rate's calls) share their references.
    references = references if references is not None else References(seeds)
    plan = plan_calls(
        task,
        shape_list,
        dtype_list,
        seeds=references.seeds,
        e2e_shapes=task.e2e_shapes(device, shapes),
        big=beyond_int32(task, shape_list, dtype_list, device),
    )
    count_kernels(plan, device, task.spec.task.language)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    clock = StageClock(plan, say, on_passed=on_passed)
    findings = (
        screen_candidate(source, task.spec.task.language, _bytes(task.baseline_path), task.draws())
        if screen
        else []
    )
    if findings:
        clock.close("failed")
        return _screened_out(task, candidate, source, started, t0, device, findings, clock)
    clock.advance("start")
    task_files = files.entries(task.folder)
    mode = detect_mode(sandbox)

    n_workers = workers if workers is not None else default_workers(device, task)
    if n_workers < 1:
        raise KernelloopError(f"workers={n_workers}: an evaluation needs at least 1 worker.")
    parts = shards.split(plan, n_workers)
    timeout = timeout_s or task.spec.rules.eval_timeout_s
    # Workers this thread started before the candidate existed (the loop's), if they match.
    warmed = (
        prestart.take(prestart.key(task, device, mode, gpu, n_workers, timeout), len(parts))
        if prestarted
        else None
    )
    judge, states, results, lane_plans = judge_in_workers(
        task,
        candidate,
        source,
        plan,
        parts,
        references,
        clock,
        say,
        device=device,
        mode=mode,
        gpu=gpu,
        timeout=timeout,
        warmed=warmed,
        n_shapes=len(shape_list),
    )

    verdict = _Verdict()
    if results[0].mode == "none":
        verdict.warnings.append(
            "NO SANDBOX (--sandbox none): the candidate ran as a plain process with the "
            "launcher's privileges."
        )
    if files.entries(task.folder) != task_files:
        files.restore(task.folder, task_files)
        verdict.reject("tamper", "the candidate modified the task folder (restored)")
    # A violated channel makes everything else the worker said worthless: it decides the
    # category (unless the worker was killed mid-line on its deadline).
    for state, result in zip(states, results, strict=True):
        if state["protocol"] and not result.timed_out:
            verdict.reject("protocol", state["protocol"])
    for f in judge.failures:
        verdict.reject(f.category, f.reason)
    if built := next((st for st in states if st.get("import_compiler")), None):
        # One worker's C++ build failed; the others waited on its build lock and then found
        # no library: the compiler's error is their reason too (said once).
        for st in states:
            if st["import_error"] and not st.get("import_compiler"):
                st["import_error"], st["import_impl"] = built["import_error"], built["import_impl"]
                st["import_compiler"] = True
    for state, result, lane_plan in zip(states, results, lane_plans, strict=True):
        _process_verdict(verdict, state, result, lane_plan, timeout)
    judged = len(judge.failures)
    seen = set().union(*(st["seen"] for st in states))
    ran = {(c.shape.label, c.dtype) for c in plan.calls if c.id in seen and c.suite != "e2e"}
    judge.finish_interface(sorted(ran))
    judge.finish_sensitivity(prove=verdict.category == "accepted")
    for f in judge.failures[judged:]:
        verdict.reject(f.category, f.reason)

    hello = next((st["hello"] for st in states if st["hello"]), {})
    kernels = next((st["kernels"] for st in states if st["kernels"]), [])
    result = results[0]
    env = _environment(hello, device, result.mode, gpu)
    verdict.warnings += interpreter_note(source) if env.interpreter else []
    counts = timings_count(device, env.interpreter, task.spec.task.language)
    timed = timing if timing is not None else counts
    timings: list[TimingStats] = []
    if verdict.category != "accepted":
        clock.close("failed", check=verdict.category)
    elif timed:
        clock.advance("timing")
    else:
        clock.close("passed", through="e2e")
        if timing is None:
            say(
                "not timed: timings never count under the Triton interpreter "
                "(--timing times anyway)"
            )
    if timed and verdict.category == "accepted":
        # Timed only once correct (a rejected candidate is never timed), each implementation
        # in its own worker; whatever the timing finds against the candidate rejects it.
        timings = first_look(
            task,
            candidate,
            against,
            shape_list,
            dtype_list[0],
            device,
            verdict,
            device_name=env.device_name,
            sandbox=sandbox,
            timeout_s=timeout_s,
            say=say,
            gpu=gpu,
            checks=judge.checks,
        )
        clock.close("passed" if verdict.category == "accepted" else "failed")
    category, reasons, warnings = verdict.category, verdict.reasons, verdict.warnings
    launches = sorted(set(judge.launches))
    return EvaluationRecord(
        task=task.name,
        task_digest=task.digest(),
        candidate=str(candidate),
        candidate_sha256=hashlib.sha256(source).hexdigest(),
        started_at=started,
        wall_s=round(time.monotonic() - t0, 3),
        environment=env,
        kernels=[
            KernelInfo(**{k: v for k, v in kf.items() if k != "impl"})
            for kf in kernels
            if kf.get("impl") == "candidate"
        ],
        # Counted at Triton's launch hook; a CUDA C++ candidate's <<<>>> launches are not
        # seen there: on a GPU its kernels are counted in the profiler's trace of its
        # compile-stage calls instead, and on a CPU left empty (not a false 0; its fusion
        # lock counts launch sites in the source, policy/static.py).
        kernel_launches_per_call=(
            (max(judge.device_kernels) if judge.device_kernels else None)
            if task.spec.task.language == "cuda"
            else (launches[-1] if launches else None)
        ),
        checks=judge.checks,
        timings=timings,
        timings_count=counts,
        worker_log_tail=_log_tail(results),
        warnings=warnings,
        stages=clock.stages(timing="skipped" if timing is None else "not run"),
        verdict=Verdict(
            accepted=category == "accepted",
            category=category,
            reasons=reasons[:20],
            judged_on=undeclared.judged_on(task, plan),
        ),
    )


def as_judged(task: Task, candidate: Path) -> Task:
    """The task as `candidate` is judged: a task may write its baseline in another language
    than its candidates (`baseline_language`: an imported KernelBench task's baseline is the
    problem's PyTorch model, its candidates Triton); the baseline's own bytes are judged
    under that language's policy (static screen, op audit), anything else under the task's."""
    info = task.spec.task
    if not info.baseline_language or info.baseline_language == info.language:
        return task
    try:
        same = Path(candidate).read_bytes() == task.baseline_path.read_bytes()
    except OSError:
        return task
    if not same:
        return task
    spec = task.spec.model_copy(
        update={"task": info.model_copy(update={"language": info.baseline_language})}
    )
    return replace(task, spec=spec)


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def timings_count(device: str, interpreter: bool, language: str) -> bool:
    """Whether timings may accept a speedup: real GPU runs, and CPU runs of tasks written
    in plain PyTorch (their CPU code is the thing being optimized); never the interpreter."""
    if interpreter:
        return False
    return device == "cuda" or language == "torch"


def _consume(
    proc,
    plan: Plan,
    judge: Judge,
    outputs: OutputDir,
    say: Progress,
    key: str,
    max_messages: int,
    clock: StageClock | None = None,
    stop_at_failure: bool = False,
) -> dict:
    """One worker's channel read and judged (`shards.consume` with one lane): its state."""
    lane = shards.Lane(proc, plan, outputs, key, max_messages)
    return shards.consume([lane], judge, say, clock or StageClock(plan), stop_at_failure)[0]
