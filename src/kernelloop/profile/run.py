"""`profile_candidate()`: profile a candidate (and its parent) in the sandbox and summarize it.

With a CUDA GPU and Nsight Compute: ncu runs inside the sandbox around the profile
worker, which makes one call of the candidate inside the NVTX range; the CSV is parsed on
this (trusted) side. Without them, the worker records the candidate's Triton launches at
the profiled shape and compiles each for sm_90 (registers, spills, shared memory), and on
a GPU times one call with torch.profiler; the summary says what is missing.

A profile is advice for the agent and the reviewer, never evidence for the gate: the
candidate runs in the same sandbox as the report file and could alter it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.profile.fallback import CompileFact, KernelTiming
from kernelloop.profile.metrics import KernelProfile, parse_ncu_csv
from kernelloop.profile.ncu_driver import diagnose_ncu_failure, find_ncu, ncu_command
from kernelloop.profile.summary import ProfileReport, summarize
from kernelloop.sandbox import SandboxConfig, run_sandboxed
from kernelloop.task import Shape, Task

WORKER = ["-m", "kernelloop.profile.worker"]


@dataclass
class Collected:
    """What one sandboxed profile run produced (all of it reported by untrusted code)."""

    kernels: list[KernelProfile] = field(default_factory=list)
    facts: list[CompileFact] = field(default_factory=list)
    timings: list[KernelTiming] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    device_name: str | None = None
    wall_s: float = 0.0


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
    the_shape = task.find_shape(shape) if shape else default_shape(task)
    the_dtype = dtype or task.spec.dtypes[0]
    if the_dtype not in task.spec.dtypes:
        raise KernelloopError(f"dtype {the_dtype!r} is not in the task; use one of {task.spec.dtypes}.")
    files = {"candidate": Path(candidate).resolve(), **({"parent": Path(parent).resolve()} if parent else {})}
    for p in files.values():
        if not p.is_file():
            raise KernelloopError(f"{p} does not exist; pass the path of a candidate .py file.")
    min_bytes = task.min_bytes(the_shape, the_dtype)
    min_flops = task.min_flops(the_shape, the_dtype)

    def gather(role: str) -> Collected:
        return collect(task, files[role], the_shape, the_dtype, device=device, sandbox=sandbox, timeout_s=timeout_s)

    say(f"profiling {' and '.join(files)} at {the_shape.label} {the_dtype}")
    if device == "cuda":
        # One at a time: two processes sharing the GPU would disturb each other's counters.
        got = {role: gather(role) for role in files}
    else:
        # Compile facts only: the two workers are independent (about halves the wall time).
        with ThreadPoolExecutor(max_workers=len(files)) as pool:
            got = dict(zip(files, pool.map(gather, files), strict=True))

    def report_for(role: str, parent_report: ProfileReport | None) -> ProfileReport:
        g = got[role]
        return summarize(g.kernels, parent=parent_report, min_bytes=min_bytes, min_flops=min_flops,
                         compile_facts=g.facts, timings=g.timings, missing=g.missing,
                         candidate=files[role].name, device=g.device_name)

    parent_report = report_for("parent", None) if parent else None
    report = report_for("candidate", parent_report)
    return ProfileOutcome(report=report, parent=parent_report, shape=the_shape.label, dtype=the_dtype,
                          wall_s=time.monotonic() - t0)


def collect(task: Task, impl: Path, shape: Shape, dtype: str, *, device: str, sandbox: str,
            timeout_s: float) -> Collected:
    """Run the profile worker for one file: under ncu when possible, else for compile facts."""
    t0 = time.monotonic()
    got = Collected()
    work = Path(tempfile.mkdtemp(prefix="kernelloop-profile-"))
    try:
        private = work / "impl" / "candidate.py"
        private.parent.mkdir()
        shutil.copyfile(impl, private)  # the worker runs a private copy of exactly these bytes
        job = {**_job(task, private, shape, dtype, device), "name": impl.name}
        ncu = find_ncu() if device == "cuda" else None
        if device != "cuda":
            got.missing.append("Nsight Compute: no CUDA GPU on this machine (compile facts for sm_90 instead)")
        elif ncu is None:
            got.missing.append("Nsight Compute: ncu not found; install it or set KERNELLOOP_NCU to its path")
        cfg = SandboxConfig(mode=sandbox, timeout_s=timeout_s, gpu=device == "cuda", rw_paths=[work],
                            ro_paths=[task.folder],
                            hidden_paths=[task.workspace()])
        if ncu is not None:
            _run_ncu(got, job, work, cfg, ncu)
        if not got.kernels:
            _run_facts(got, job, work, cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    got.wall_s = time.monotonic() - t0
    return got


def _job(task: Task, impl: Path, shape: Shape, dtype: str, device: str) -> dict:
    params = dict(task.spec.params)
    if task.spec.stochastic:
        params[task.spec.stochastic.seed_param] = 1234
    inputs_file, inputs_func = task.file_and_function("inputs")
    arch = 90
    if device == "cuda":
        import torch

        major, minor = torch.cuda.get_device_capability()
        arch = 10 * major + minor
    return {"device": device, "impl": str(impl), "entry": task.spec.task.entry, "inputs_file": str(inputs_file),
            "inputs_func": inputs_func, "dims": dict(shape.dims), "dtype": dtype, "params": params,
            "warmup": 2, "input_seed": 0, "arch": arch}


def _messages(stdout: bytes) -> list[dict]:
    out = []
    for line in stdout.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # a profiler banner, not ours
        if isinstance(msg, dict) and "type" in msg:
            out.append(msg)
    return out


def _write_job(work: Path, job: dict) -> Path:
    path = work / f"job-{job['mode']}.json"
    path.write_text(json.dumps(job))
    return path


def _check_import(msgs: list[dict], impl: str) -> None:
    for m in msgs:
        if m["type"] == "import_error":
            last = [ln for ln in str(m.get("error", "")).splitlines() if ln.strip()][-1:] or ["(no message)"]
            raise KernelloopError(f"{impl} failed to import in the sandbox ({last[0][:200]}); fix it and profile again.")


def _run_ncu(got: Collected, job: dict, work: Path, cfg: SandboxConfig, ncu: Path) -> None:
    csv_path = work / "ncu.csv"
    job_path = _write_job(work, {**job, "mode": "ncu"})
    argv = ncu_command([sys.executable, *WORKER, "--job", str(job_path)], csv_path, ncu=ncu)
    res = run_sandboxed(argv, work, cfg)
    msgs = _messages(res.stdout)
    _check_import(msgs, job.get("name") or Path(job["impl"]).name)
    got.device_name = next((m["env"].get("device_name") for m in msgs if m["type"] == "hello"), None)
    text = csv_path.read_text(errors="replace") if csv_path.is_file() else ""
    got.kernels = parse_ncu_csv(text) if text else []
    if got.kernels:
        return
    errors = [m.get("error", "") for m in msgs if m["type"] == "error"]
    output = "\n".join([text, res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace"), *errors])
    known = diagnose_ncu_failure(output)
    if known is not None:
        why = str(known)
    elif res.timed_out:
        why = f"Nsight Compute did not finish within {cfg.timeout_s:g} s"
    else:
        tail = [ln for ln in output.splitlines() if ln.strip()][-1:] or ["no output"]
        why = f"Nsight Compute produced no kernel rows (exit {res.returncode}: {tail[0][:200]})"
    got.missing.append(why.rstrip("."))


def _run_facts(got: Collected, job: dict, work: Path, cfg: SandboxConfig) -> None:
    job_path = _write_job(work, {**job, "mode": "facts"})
    res = run_sandboxed([sys.executable, *WORKER, "--job", str(job_path)], work, cfg)
    msgs = _messages(res.stdout)
    _check_import(msgs, job.get("name") or Path(job["impl"]).name)
    got.device_name = got.device_name or next(
        (m["env"].get("device_name") for m in msgs if m["type"] == "hello" and job["device"] == "cuda"), None)
    for m in msgs:
        if m["type"] == "facts":
            got.facts = [CompileFact.model_validate(f) for f in m.get("kernels", [])]
            got.missing += [f"note: {n}" for n in m.get("notes", [])]
        elif m["type"] == "timings":
            got.timings = [KernelTiming.model_validate(t) for t in m.get("kernels", [])]
        elif m["type"] == "error":
            last = [ln for ln in str(m.get("error", "")).splitlines() if ln.strip()][-1:] or ["(no message)"]
            got.missing.append(f"compile facts: the worker failed ({last[0][:200]})")
    if res.timed_out:
        got.missing.append(f"compile facts: the worker exceeded {cfg.timeout_s:g} s")
    elif not got.facts and not any(m["type"] == "error" for m in msgs):
        got.missing.append(f"compile facts: the worker returned none (exit {res.returncode})")
