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
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.channel.text import compiler_lines
from kernelloop.evaluate.trusted.clock.bench_fill import below_floor
from kernelloop.evaluate.trusted.clock.interleave import Settings, run_timing
from kernelloop.evaluate.trusted.launch import compile_cache, native_source, prestart
from kernelloop.evaluate.trusted.launch import workers as timing_workers
from kernelloop.evaluate.trusted.launch.gpu_bind import bound_to_gpu
from kernelloop.evaluate.trusted.run_record import (
    _environment,
    _log_tail,
    _process_verdict,
    _screened_out,
    _timing,
    _Verdict,
)
from kernelloop.evaluate.trusted.screen.static import screen_candidate
from kernelloop.evaluate.trusted.values import shards, undeclared
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.judge_e2e import e2e_job
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
from kernelloop.sandbox import SandboxProcess, detect_mode
from kernelloop.task import Shape, Task, files
from kernelloop.task.adhoc import shapes_from
from kernelloop.task.roofline import floor_on, precision_hint

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
    work = Path(tempfile.mkdtemp(prefix="kernelloop-eval-", dir=prestart.scratch_root()))
    procs: list[SandboxProcess] = []
    results = []
    lanes: list[shards.Lane] = []
    pending_caches: list[Path] = []
    lane_dirs: list[Path] = []
    try:
        inputs_file, inputs_func = task.file_and_function("inputs")
        cfg = None
        say(
            f"{len(parts)} worker(s) "
            f"{'taking their job' if warmed else 'starting'} "
            f"({len(plan.calls)} correctness calls, sandbox={mode})"
        )
        judge = Judge(task, device, references)  # loads the reference before any worker runs
        judge.worker_share_bytes = worker_share_bytes(device, len(parts))
        for k, part in enumerate(parts):
            # Each worker its own folder (its private copy of exactly these bytes, its out
            # dir) and its own key: no worker can reach another's outputs.
            lane = warmed.lanes[k] if warmed else None
            lane_dir = lane.lane_dir if lane else prestart.make_lane_dir(work, k)
            lane_dirs.append(lane_dir)
            impl_dir, out_dir = lane_dir / "impls", lane_dir / "out"
            shutil.copyfile(candidate, impl_dir / "candidate.py")
            key = channel.new_key()
            job = {
                "device": device,
                "entry": task.spec.task.entry,
                "model_class": task.model_class(),
                "output_like": task.spec.task.output_like,
                "inputs_file": str(inputs_file),
                "inputs_func": inputs_func,
                "impls": {"candidate": str(impl_dir / "candidate.py")},
                "params": dict(task.spec.params),
                "out_dir": str(out_dir),
                "max_outstanding": 3,
                "calls": [c.to_job() for c in part.calls],
                "channel_key": key,
                "language": task.spec.task.language,
                "e2e": e2e_job(task),
                "private_pid_namespace": mode in ("bwrap", "unshare"),
            }
            if timing_workers.PROFILE_DIR is not None:  # a developer's diagnosis (cProfile)
                job["cprofile"] = True
            native = task.spec.task.language == "cuda"
            if lane is not None:
                cfg = lane.cfg
                if lane.cache is not None and not compile_cache.adopt(lane.cache, source):
                    pending_caches.append(lane.cache)  # the bytes have a folder already
            else:
                cfg = prestart.lane_config(task, device, mode, gpu, timeout, lane_dir)
                # Only the candidate's code runs in this worker: its own compile cache,
                # shared with its timing worker (compile_cache.py says why that is safe).
                cfg = compile_cache.bind(cfg, source, native=native)
            # Opened before the job is written: every output is read relative to this
            # descriptor (a warm worker has run no implementation's code yet), or comes
            # through the worker's shared output slots (inbox.py; a warm worker's were
            # made when it started).
            inbox = lane.inbox if lane is not None else Inbox.create(device)
            if inbox is not None:
                job["slots"] = inbox.job()
            outputs = OutputDir(out_dir, inbox)
            try:
                if lane is not None:
                    proc = lane.proc
                    proc.feed(json.dumps(job).encode(), timeout_s=timeout)
                else:
                    proc = SandboxProcess(
                        prestart.WORKER_ARGV,
                        lane_dir,
                        cfg,
                        json.dumps(job).encode(),
                        keep_fds=tuple(inbox.child_fds()) if inbox else (),
                    )
                    if inbox is not None:
                        inbox.started()
            except BaseException:
                outputs.close()
                raise
            procs.append(proc)
            limit = len(part.calls) + len(shape_list) * 2 + 16
            lanes.append(shards.Lane(proc, part, outputs, key, limit))
        if warmed:  # lanes this evaluation does not need (fewer parts than workers)
            prestart.stop_lanes(warmed.lanes[len(parts) :])
        try:
            states = shards.consume(
                lanes,
                judge,
                say,
                clock,
                stop_at_failure=True,
                plan=plan,
                compile_budget_s=task.spec.rules.compile_budget_s,
            )
        finally:
            while procs:  # always: a worker is never left running
                results.append(procs.pop(0).finish())
            _keep_profiles(lane_dirs)
            if cfg is not None and (cfg.gpu or task.spec.task.language == "cuda"):
                compile_cache.trim(source)
    finally:
        for proc in procs:  # a worker started before another failed to start
            proc.stop()
            proc.finish()
        for lane in lanes:
            lane.outputs.close()
        shutil.rmtree(work, ignore_errors=True)
        if warmed:  # any warm worker left without its job (something failed first)
            prestart.stop_lanes([ln for ln in warmed.lanes if not ln.proc.fed])
            shutil.rmtree(warmed.work, ignore_errors=True)
        for path in pending_caches:
            shutil.rmtree(path, ignore_errors=True)

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
    if built := next((st for st in states if compiler_lines(st["import_error"])), None):
        # One worker's C++ build failed; the others waited on its build lock and then found
        # no library: the compiler's error is their reason too (said once).
        for st in states:
            if st["import_error"] and not compiler_lines(st["import_error"]):
                st["import_error"], st["import_impl"] = built["import_error"], built["import_impl"]
    for state, result, lane in zip(states, results, lanes, strict=True):
        _process_verdict(verdict, state, result, lane.plan, timeout)
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
    counts = timings_count(device, env.interpreter, task.spec.task.language)
    timed = timing if timing is not None else counts
    timings: list[TimingStats] = []
    if verdict.category != "accepted":
        clock.close("failed")
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
        say("timing the candidate and the baseline, one sandboxed worker each")
        outcome = run_timing(
            task,
            {"candidate": candidate, "baseline": task.baseline_path, **(against or {})},
            shape_list,
            dtype_list[0],
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
            _timing(task, shape, slot, r, dtype_list[0], env.device_name)
            for shape in shape_list
            for slot, r in outcome.shapes.get(shape.label, {}).items()
        ]
        for t in timings:  # a time below the floor is a cheat or a floor mistake, never a %
            shape = next(s for s in shape_list if s.label == t.shape)
            floor = floor_on(task, shape, dtype_list[0], env.device_name)
            hint = precision_hint(task, floor, dtype_list[0])
            if why := below_floor(t.shape, t.impl, t.median_ms, t.floor_ms, hint):
                t.pct_of_floor = None
                if t.impl == "candidate":
                    verdict.reject("timing", why)
                else:
                    verdict.warnings.append(f"timing: {why}")
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


def _keep_profiles(lane_dirs: list[Path]) -> None:
    """A developer's diagnosis: each correctness worker's cProfile, where one was asked for
    (`workers.PROFILE_DIR`, benchmarks/correctness_profile.py)."""
    if timing_workers.PROFILE_DIR is None:
        return
    for k, lane_dir in enumerate(lane_dirs):
        prof = lane_dir / "worker.prof"
        if prof.is_file() and not prof.is_symlink():
            name = f"correctness-{k}-{time.monotonic_ns()}.prof"
            shutil.copyfile(prof, timing_workers.PROFILE_DIR / name)


def default_workers(device: str, task: Task | None = None) -> int:
    """Correctness workers per evaluation. On the CPU two when it has two cores (the
    interpreter runs one thread per worker). On a GPU a new candidate's evaluation is mostly
    its Triton kernels compiling once per specialisation, and the workers compile theirs in
    parallel (shards.split keeps a shape's calls together): on the H200 (2026-12-02, warm
    workers, output slots, the flagship's honest candidate, median of 3) the full stage took
    9.8 s with one worker, 7.1 s with two and 4.1 s with four, the whole judgement with the
    gate's benchmark 17.6 s with four, 22.5 s with two (benchmarks/results/
    2026-12-02-h200-session19). So up to GPU_WORKERS, one per two CPU cores, and as many as
    the GPU's memory holds (`gpu_memory_workers`); without the task, two."""
    if device == "cpu":
        return max(1, min(2, os.cpu_count() or 1))
    if task is None:
        return 2
    by_cpu = max(1, (os.cpu_count() or 2) // 2)
    return max(1, min(GPU_WORKERS, by_cpu, gpu_memory_workers(task)))


GPU_WORKERS = 4
# A correctness worker's GPU memory, per element of the task's largest GPU shape (the
# product of its dims) and beyond a fixed part: KernelBench level1/23's 4096x393216 float32
# softmax took 36.6 GB per worker on the H200 (inputs, the output and the previous one,
# its slots), ~23 bytes per element; the fixed part is the CUDA context and two 512 MB slots.
WORKER_BYTES_PER_ELEMENT = 24
WORKER_FIXED_BYTES = 2 << 30
GPU_SHARE = 0.6  # of the GPU's memory for correctness workers (the judge needs the rest)


def worker_share_bytes(device: str, n_workers: int) -> int | None:
    """One correctness worker's share of the GPU's memory (None on the CPU): what a worker
    may hold before an out-of-memory is its own (oom.py)."""
    total = _gpu_total_bytes() if device == "cuda" else None
    return None if total is None else int(GPU_SHARE * total) // max(1, n_workers)


def _gpu_total_bytes() -> int | None:
    """The current GPU's memory, or None where CUDA cannot say."""
    try:
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    except (RuntimeError, AssertionError):
        return None


def gpu_memory_workers(task: Task) -> int:
    """How many correctness workers the GPU's memory holds for `task` (at least one): a
    deliberate overestimate for tasks whose dims multiply to more than their largest tensor
    (a matmul's M x N x K), which then get fewer workers, never an out-of-memory."""
    total = _gpu_total_bytes()
    if total is None:
        return 1
    elements = max((math.prod(s.dims.values()) for s in task.spec.shapes), default=1)
    per_worker = WORKER_BYTES_PER_ELEMENT * elements + WORKER_FIXED_BYTES
    return max(1, int(GPU_SHARE * total // per_worker))


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


# evaluate()'s timing is a first look, not the gate's benchmark (kernelloop bench): few
# rounds, no A/A slot, no second timer.
EVAL_TIMING = Settings(reps=50, min_reps=10, cpu_reps=3, cpu_min_reps=3, max_s_per_shape=2.0)
