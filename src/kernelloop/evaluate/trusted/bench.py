"""`benchmark()`: the trusted side of a timing run, and the benchmark record it produces.

One fresh sandboxed worker times the candidate, the current best and the baseline (and
any `against` files) interleaved, shape by shape, plus an A/A slot (the best against
itself) that measures the noise. Nothing the worker says is taken on trust:
- statistics are recomputed here from the raw samples;
- every shape's reported time must fit inside the interval this process observed
  between the worker's messages (a worker cannot claim more time than elapsed, e.g. to
  make the best look slow);
- a median below the task's minimal-traffic floor is impossible and rejected;
- clocks and throttle reasons are read with nvidia-smi around the run.
The gate (kernelloop.gate) refuses a candidate without this record, or with `problems`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import aa_slot, quantiles
from kernelloop.evaluate.trusted import channel
from kernelloop.evaluate.trusted.bench_record import (  # noqa: F401  (re-exported: bench.X is the public path)
    BenchmarkRecord,
    GpuState,
    ImplTiming,
    ShapeBench,
    noise,
    paired_log_ratio,
    speedup,
)
from kernelloop.evaluate.trusted.judge import last_line
from kernelloop.evaluate.trusted.run import (
    dram_ceiling,
    resolve_device,
    select_shapes,
    timings_count,
)
from kernelloop.evaluate.trusted.static import screen_source
from kernelloop.sandbox import SandboxConfig, SandboxProcess
from kernelloop.task import Shape, Task

FLOOR_MARGIN = 0.97  # a median below 97% of the floor is physically impossible, not fast
OBSERVED_SLACK_S = 0.05  # message delivery jitter on the trusted side's clock
HIDDEN_WARN_FRACTION = 0.10  # warn when more calls than this left work outside the calling stream


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
) -> BenchmarkRecord:
    """Time `candidate` against the best (if given) and the baseline on the task's shapes.

    The candidate goes through the same static screen as in `evaluate` (`screen=False` is
    for tests of the runtime defences): a refused source is never run, and its record
    carries the findings as problems, so the gate refuses it."""
    say = progress or (lambda _m: None)
    device = resolve_device(device)
    dtype = dtype or task.spec.dtypes[0]
    if dtype not in task.spec.dtypes:
        raise KernelloopError(f"dtype {dtype!r} is not in the task; use one of {task.spec.dtypes}.")
    shape_list = select_shapes(task, device, shapes)
    impls: dict[str, Path] = {"candidate": Path(candidate), "baseline": task.baseline_path}
    if best is not None:
        impls["best"] = Path(best)
    for name, path in (against or {}).items():
        if name in impls:
            raise KernelloopError(f"--against name {name!r} is taken; rename the file (names must be unique).")
        impls[name] = Path(path)
    for name, path in impls.items():
        if not path.is_file():
            raise KernelloopError(f"{name} file {path} does not exist; pass the path of a .py file.")
    sources = {n: p.read_bytes() for n, p in impls.items()}
    best_name = "best" if "best" in impls else "baseline"
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    spec = _timing_spec(task, shape_list, dtype, list(impls), device, best_name if aa else None,
                        ["candidate", best_name] if profile else [], reps, max_s_per_shape)
    findings = screen_source(sources["candidate"].decode(errors="replace"), task.spec.task.language) if screen else []
    key = channel.new_key()
    gpu_before = read_gpu_state("before") if device == "cuda" else None
    work = Path(tempfile.mkdtemp(prefix="kernelloop-bench-"))
    try:
        impl_dir = work / "impls"
        impl_dir.mkdir()
        (work / "out").mkdir()
        files = {}
        for name, data in sources.items():
            (impl_dir / f"{name}.py").write_bytes(data)  # exactly the bytes that were hashed
            files[name] = str(impl_dir / f"{name}.py")
        inputs_file, inputs_func = task.file_and_function("inputs")
        job = {
            "device": device, "entry": task.spec.task.entry, "output_like": task.spec.task.output_like,
            "inputs_file": str(inputs_file), "inputs_func": inputs_func, "impls": files,
            "params": dict(task.spec.params), "out_dir": str(work / "out"), "max_outstanding": 3,
            "calls": [], "timing": spec, "channel_key": key,
        }
        interp = device == "cpu" and task.spec.task.language == "triton"
        cfg = SandboxConfig(
            mode=sandbox, timeout_s=timeout_s or task.spec.rules.eval_timeout_s, gpu=device == "cuda",
            rw_paths=[work], ro_paths=[task.folder], hidden_paths=[task.folder / ".kernelloop"],
            extra_env={"TRITON_INTERPRET": "1"} if interp else {},
        )
        say(f"timing {len(impls)} implementation(s) on {len(shape_list)} shape(s), sandbox={cfg.mode}")
        if findings:
            say(f"static screen refused the candidate: {findings[0].render()}")
            msgs, result = _consume(iter(()), say, key), None
        else:
            proc = SandboxProcess([sys.executable, "-m", "kernelloop.evaluate.worker"], work, cfg,
                                  json.dumps(job).encode())
            msgs = _consume(proc.lines(), say, key)
            result = proc.finish()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    gpu_after = read_gpu_state("after") if device == "cuda" else None

    hello = msgs["hello"]
    interpreter = bool(hello.get("interpreter", interp))
    rec = BenchmarkRecord(
        task=task.name, task_digest=task.digest(), language=task.spec.task.language,
        candidate=str(Path(candidate).resolve()),
        candidate_sha256=hashlib.sha256(sources["candidate"]).hexdigest(),
        impl_sha256={n: hashlib.sha256(b).hexdigest() for n, b in sources.items()},
        best=best_name, started_at=started, wall_s=0.0, device=device,
        device_name=str(hello.get("device_name") or platform.machine()),
        compute_capability=hello.get("compute_capability"),
        driver=(gpu_before.raw.get("driver_version") if gpu_before else None),
        torch=str(hello.get("torch") or torch.__version__), triton=hello.get("triton"), cuda=hello.get("cuda"),
        python=str(hello.get("python") or platform.python_version()), sandbox=result.mode if result else "not run",
        interpreter=interpreter, gpu_state=[g for g in (gpu_before, gpu_after) if g is not None],
        aa_impl=best_name if aa else None,
        timings_count=timings_count(device, interpreter, task.spec.task.language),
        worker_log_tail=result.stderr.decode(errors="replace")[-3000:] if result else "",
    )
    if findings:
        rec.static_findings = [f"static screen: {f.render()}" for f in findings]
        rec.problems.extend(rec.static_findings)
        rec.wall_s = round(time.monotonic() - t0, 3)
        return rec
    _failures(rec, msgs, result, cfg.timeout_s)
    fill_shapes(rec, task, shape_list, dtype, list(impls), msgs)
    _throttle_warnings(rec)
    rec.wall_s = round(time.monotonic() - t0, 3)
    return rec


def _timing_spec(task, shapes, dtype, impls, device, aa, profile, reps, max_s) -> dict:
    st = task.spec.stochastic
    return {
        "shapes": [{"dims": s.dims, "label": s.label} for s in shapes],
        "dtype": dtype,
        "impls": impls,
        "aa": aa,
        "profile": profile if device == "cuda" else [],
        "params": {st.seed_param: 1234} if st else {},
        "input_seed": 7,
        "order_seed": 11,
        # GPU: rounds until the shape's time budget (~110 rounds of ~5 ms on the largest
        # flagship shape), so the samples spread over it and a clock transient cannot
        # carry a median; the reps cap bounds fast shapes. CPU: single-threaded so a
        # shared runner's other load perturbs it less; enough rounds for a stable median.
        "reps": reps or 400,
        "min_reps": 20,
        "warmup": 3,
        "warmup_s": 0.05,
        "max_s_per_shape": max_s or (0.6 if device == "cuda" else 0.8),
        "cpu_reps": reps or 200,
        "cpu_min_reps": 15,
        "cpu_warmup": 2,
        "cpu_threads": 1,
    }


def _consume(lines, say, key: str) -> dict:
    """Read the worker's messages, stamping each with this process's own clock. Only lines
    carrying the run's secret key count (kernelloop.evaluate.trusted.channel): a candidate that
    writes to the channel's descriptor cannot forge a timing."""
    msgs: dict = {"hello": {}, "timing": [], "errors": [], "import_error": "", "fatal": "",
                  "protocol": "", "done": False, "begin_t": None, "kernels": [], "facts": []}
    state = channel.new_state()
    for raw in lines:
        now = time.monotonic()
        msg = channel.parse(raw, key, state)
        msgs["protocol"] = state["protocol"]
        if msg is None:
            continue
        kind = msg["type"]
        if kind == "hello":
            msgs["hello"] = msg.get("env", {})
        elif kind == "timing_begin":
            msgs["begin_t"] = msgs["begin_t"] or now
        elif kind == "timing":
            msgs["timing"].append((now, msg))
            say(f"timed {msg.get('impl')} on {msg.get('shape')}")
        elif kind == "timing_error":
            msgs["errors"].append(last_line(msg.get("error", "")))
        elif kind == "import_error":
            msgs["import_error"] = f"{msg.get('impl')}: {last_line(msg.get('error', ''))}"
        elif kind == "fatal":
            msgs["fatal"] = msg.get("error", "fatal error")
        elif kind == "compile":
            msgs["kernels"] = msg.get("kernels", [])
        elif kind == "done":
            msgs["done"] = True
    msgs["facts"] = [why for _cat, why in channel.worker_facts(state)]
    return msgs


def _failures(rec: BenchmarkRecord, msgs: dict, result, timeout_s: float) -> None:
    p = rec.problems
    if msgs["import_error"]:
        p.append(f"an implementation failed to import ({msgs['import_error']})")
    if result.timed_out:
        p.append(f"the benchmark worker exceeded its {timeout_s:g} s limit and was killed")
    elif msgs["fatal"]:
        p.append(msgs["fatal"])
    elif result.returncode != 0:
        p.append(f"the benchmark worker died with exit code {result.returncode}")
    if msgs["protocol"]:
        p.append(msgs["protocol"])
    p.extend(msgs["facts"])
    p.extend(f"timing failed: {e}" for e in msgs["errors"])
    if not msgs["done"] and not p:
        p.append("the benchmark worker ended without finishing its protocol")
    if result.mode == "none":
        rec.warnings.append("NO SANDBOX: the timed code ran as a plain process.")


def fill_shapes(rec: BenchmarkRecord, task: Task, shapes: list[Shape], dtype: str, impls: list[str], msgs: dict) -> None:
    ceiling = dram_ceiling(rec.device_name) if rec.device == "cuda" else None
    slots = impls + ([aa_slot(rec.aa_impl)] if rec.aa_impl else [])
    by_shape: dict[str, list[tuple[float, dict]]] = {}
    for t, m in msgs["timing"]:
        by_shape.setdefault(str(m.get("shape")), []).append((t, m))
    prev_t = msgs["begin_t"]
    methods = set()
    for shape in shapes:
        floor_ms = task.min_bytes(shape, dtype) / ceiling * 1e3 if ceiling else None
        sb = ShapeBench(shape=shape.label, dtype=dtype, weight=shape.weight, tag=shape.tag, floor_ms=floor_ms)
        rec.shapes.append(sb)
        got = by_shape.get(shape.label, [])
        for _, m in got:
            it = _impl_timing(m, floor_ms, rec.problems, shape.label)
            if it is not None and it.impl in slots and it.impl not in sb.impls:
                sb.impls[it.impl] = it
                sb.reported_s += max(float(m.get("timed_ms_total") or 0.0), sum(it.samples_ms)) / 1e3
                methods.add(it.method)
        missing = [s for s in slots if s not in sb.impls]
        if missing and not rec.problems:
            rec.problems.append(f"{shape.label}: no timing for {', '.join(missing)}")
        if got and prev_t is not None:
            sb.observed_s = round(got[0][0] - prev_t, 4)
            if sb.reported_s > sb.observed_s + OBSERVED_SLACK_S:
                rec.problems.append(
                    f"{shape.label}: the worker reported {sb.reported_s:.3f} s of timed calls in a "
                    f"{sb.observed_s:.3f} s interval: its numbers are not real"
                )
        if got:
            prev_t = got[-1][0]
        sb.noise_rel, sb.aa_rel_diff = noise(sb, rec.best, rec.aa_impl)
        cand = sb.impls.get("candidate")
        # Every flagged call is timed device-wide either way; the warning is for a pattern.
        # Honest kernels on the H200 had 1-3% of calls flagged by host wake-up jitter.
        if cand is not None and cand.hidden_calls > max(2, HIDDEN_WARN_FRACTION * cand.n):
            rec.warnings.append(f"{shape.label}: {cand.hidden_calls} of {cand.n} candidate calls left work running outside "
                                f"the calling stream; they were timed device-wide")
    if msgs["begin_t"] is None and not rec.problems:
        rec.problems.append("the worker never started its timing phase")
    if msgs["timing"] and msgs["begin_t"] is not None:
        rec.timing_phase_s = round(msgs["timing"][-1][0] - msgs["begin_t"], 3)
    rec.method = "; ".join(sorted(methods))


def _impl_timing(m: dict, floor_ms: float | None, problems: list[str], label: str) -> ImplTiming | None:
    try:
        samples = [float(x) for x in m["samples_ms"]]
        if not samples or not all(math.isfinite(x) and x > 0 for x in samples):
            raise ValueError("empty or non-positive samples")
    except (KeyError, TypeError, ValueError) as e:
        problems.append(f"{label}: unusable timing message for {m.get('impl')!r} ({e})")
        return None
    med, p20, p80 = quantiles(samples)  # recomputed: the worker's summary is not used
    prof = m.get("profiler_ms")
    it = ImplTiming(
        impl=str(m.get("impl")), median_ms=med, p20_ms=p20, p80_ms=p80, n=len(samples),
        method=str(m.get("method", ""))[:200], hidden_calls=int(m.get("hidden_calls") or 0),
        profiler_ms=float(prof) if isinstance(prof, int | float) and prof > 0 else None,
        pct_of_floor=100.0 * floor_ms / med if floor_ms else None, samples_ms=samples,
    )
    bad = channel.timed_output_problem(m)
    if bad:
        problems.append(f"{label}: {bad}")
    if floor_ms and med < FLOOR_MARGIN * floor_ms:
        problems.append(f"{label}: {it.impl} median {med:.4f} ms is below the minimal-traffic floor "
                        f"{floor_ms:.4f} ms: impossible, so the timing is not real")
    return it


_SMI_FIELDS = ["driver_version", "clocks.sm", "clocks.mem", "clocks_throttle_reasons.active", "temperature.gpu", "power.draw"]


def read_gpu_state(when: Literal["before", "after"]) -> GpuState | None:
    """Clocks and throttle reasons from nvidia-smi (None where it is missing)."""
    if not shutil.which("nvidia-smi"):
        return None
    # Newer drivers call the throttle field clocks_event_reasons; try both names.
    for fields in (_SMI_FIELDS, [f.replace("clocks_throttle_reasons", "clocks_event_reasons") for f in _SMI_FIELDS]):
        try:
            r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if r.returncode == 0 and r.stdout.strip():
            vals = [v.strip() for v in r.stdout.splitlines()[0].split(",")]
            raw = dict(zip(_SMI_FIELDS, vals, strict=False))
            return GpuState(when=when, sm_clock_mhz=_num(raw.get("clocks.sm")), mem_clock_mhz=_num(raw.get("clocks.mem")),
                            throttle_reasons=raw.get("clocks_throttle_reasons.active"),
                            temperature_c=_num(raw.get("temperature.gpu")), power_w=_num(raw.get("power.draw")), raw=raw)
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
            rec.warnings.append(f"clocks throttled {g.when} the run (reasons {g.throttle_reasons}, SM {g.sm_clock_mhz} MHz)")


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None
