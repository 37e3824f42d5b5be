"""The correctness workers of one evaluation: each part of the plan (shards.split) in a
sandboxed worker of its own — a warm one the loop started before the candidate existed
(prestart.py) where its settings match, else a fresh one — with its own folder, key,
compile cache and output slots; their channels read and judged together (shards.consume),
stopping at the first failed check; every worker finished and every folder removed,
whatever happened."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from pathlib import Path

from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.launch import compile_cache, late, naming, prestart
from kernelloop.evaluate.trusted.launch import workers as timing_workers
from kernelloop.evaluate.trusted.launch.worker_count import worker_share_bytes
from kernelloop.evaluate.trusted.values import shards
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.judge_e2e import e2e_job
from kernelloop.evaluate.trusted.values.plan import Plan
from kernelloop.evaluate.trusted.values.refcache import References
from kernelloop.evaluate.trusted.values.stages import StageClock
from kernelloop.sandbox import SandboxProcess
from kernelloop.task import Task


def judge_in_workers(
    task: Task,
    candidate: Path,
    source: bytes,
    plan: Plan,
    parts: list[Plan],
    references: References,
    clock: StageClock,
    say,
    *,
    device: str,
    mode: str,
    gpu: int | None,
    timeout: float,
    warmed,
    n_shapes: int,
) -> tuple[Judge, list[dict], list, list[Plan]]:
    """Every part's worker started, fed its job and judged: (the judge, each worker's
    channel state, each worker's process result, each worker's part of the plan), in
    order. Warm workers are stopped whatever fails, the judge's loading included."""
    work = Path(tempfile.mkdtemp(dir=prestart.scratch_root()))  # no "kernelloop" in its paths
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
        module_name = naming.module_name(candidate)
        st = task.spec.stochastic
        late_checks = late.late_jobs(
            parts, st.seed_param if st else None, plan.calls, device
        )  # issue 45
        for k, lj in late_checks.items():  # its burn calls run inside that call's deadline
            for c in parts[k].calls:
                if c.id == lj["before"]:
                    c.late_burn, c.late_numel = lj["burn"], math.prod(lj["dims"].values())
        for k, part in enumerate(parts):
            # Each worker its own folder (its private copy of exactly these bytes, its out
            # dir) and its own key: no worker can reach another's outputs.
            lane = warmed.lanes[k] if warmed else None
            lane_dir = lane.lane_dir if lane else prestart.make_lane_dir(work, k)
            lane_dirs.append(lane_dir)
            impl_dir, out_dir = lane_dir / "impls", lane_dir / "out"
            # Under the name a user's import would give it (launch/naming.py; issue 45).
            impl_file = impl_dir / f"{module_name}.py"
            shutil.copyfile(candidate, impl_file)
            key = channel.new_key()
            job = {
                "device": device,
                "entry": task.spec.task.entry,
                "model_class": task.model_class(),
                "output_like": task.spec.task.output_like,
                "inputs_file": str(inputs_file),
                "inputs_func": inputs_func,
                "impls": {"candidate": str(impl_file)},
                "params": dict(task.spec.params),
                "out_dir": str(out_dir),
                "max_outstanding": 3,
                "calls": [c.to_job() for c in part.calls],
                "channel_key": key,
                "tf32": task.spec.precision.tf32,  # the precision contract (torch_precision.py)
                "language": task.spec.task.language,
                "e2e": e2e_job(task),
                "private_pid_namespace": mode in ("bwrap", "unshare"),
            }
            if k in late_checks:
                job["late"] = late_checks[k]
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
            limit = len(part.calls) + n_shapes * 2 + 16
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
                # a hang is a `timeout` at its call (deadline.py). A C++ build runs in the
                # first call's import and torch.compile in its first call: their allowance
                # is the compile budget (the interpreter and Triton: the device's default).
                device=device,
                compile_allowance_s=(
                    task.spec.rules.compile_budget_s
                    if task.spec.task.language in ("cuda", "torch")
                    else None
                ),
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
    return judge, states, results, [ln.plan for ln in lanes]


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
