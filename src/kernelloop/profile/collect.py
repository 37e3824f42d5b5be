"""One sandboxed profile run of one source (run.py's `profile_candidate` runs one per
source): under Nsight Compute where there is a GPU and ncu, else the profile worker's
compile facts (and, on a GPU, one call timed with torch.profiler). Each run gets a fresh
work dir; everything read back goes through profile/untrusted.py, and every message and
model the worker sends is validated before it is believed (it is untrusted code)."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelloop.errors import KernelloopError
from kernelloop.profile.fallback import CompileFact, KernelTiming
from kernelloop.profile.metrics import KernelProfile, parse_ncu_csv
from kernelloop.profile.ncu_driver import diagnose_ncu_failure, find_ncu, ncu_command
from kernelloop.profile.untrusted import UntrustedFile, clean, open_dir, read_regular, write_new
from kernelloop.sandbox import SandboxConfig, run_sandboxed
from kernelloop.task import Shape, Task

WORKER = ["-m", "kernelloop.profile.worker"]
MAX_CSV_BYTES = 16 << 20  # ncu's details page: ~50 KB per kernel (H200 captures)
MAX_LINES = 200  # channel lines read from one profile run
MAX_LINE_BYTES = 1 << 20


@dataclass
class Collected:
    """What one sandboxed profile run produced (all of it reported by untrusted code)."""

    kernels: list[KernelProfile] = field(default_factory=list)
    facts: list[CompileFact] = field(default_factory=list)
    # Compile facts at the `more_shapes` asked for (facts mode), by shape label.
    facts_by_shape: dict[str, list[CompileFact]] = field(default_factory=dict)
    timings: list[KernelTiming] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    device_name: str | None = None
    wall_s: float = 0.0


def collect(
    task: Task,
    source: bytes,
    name: str,
    shape: Shape,
    dtype: str,
    *,
    device: str,
    sandbox: str,
    timeout_s: float,
    more_shapes: tuple[Shape, ...] = (),
) -> Collected:
    """Run the profile worker on one source: under ncu when possible, else for compile facts
    (with `more_shapes`, at each of those too, in the same run: `Collected.facts_by_shape`)."""
    t0 = time.monotonic()
    got = Collected()
    job = {**_job(task, Path("impl") / "candidate.py", shape, dtype, device), "name": name}
    job["more_shapes"] = [(s.label, dict(s.dims)) for s in more_shapes]
    ncu = find_ncu() if device == "cuda" else None
    if device != "cuda":
        got.missing.append(
            "Nsight Compute: no CUDA GPU on this machine (compile facts for sm_90 instead)"
        )
    elif ncu is None:
        got.missing.append(
            "Nsight Compute: ncu not found; install it or set KERNELLOOP_NCU to its path"
        )
    # The same sandbox as `evaluate` (the package is bound back by the sandbox itself).
    cfg = SandboxConfig(
        mode=sandbox,
        timeout_s=timeout_s,
        gpu=device == "cuda",
        ro_paths=[task.folder],
        hidden_paths=[task.workspace()],
    )
    if ncu is not None:
        _run_ncu(got, job, cfg, ncu, source)
    if not got.kernels:
        _run_facts(got, job, cfg, source)
    got.wall_s = time.monotonic() - t0
    return got


def _ncu_config(cfg: SandboxConfig) -> SandboxConfig:
    """The sandbox ncu runs in: the worker's, plus what ncu itself needs from seccomp."""
    return (
        cfg  # SECCOMP (sandbox helper): return dataclasses.replace(cfg, seccomp_profile="profile")
    )


@contextmanager
def _run_dir(job: dict, source: bytes) -> Iterator[tuple[Path, int, dict]]:
    """A fresh work dir for one sandboxed run, its descriptor (taken before the run, so the
    run cannot swap the directory), and the job with a fresh channel key and absolute paths."""
    work = Path(tempfile.mkdtemp(prefix="kernelloop-profile-"))
    fd = open_dir(work)
    try:
        (work / "impl").mkdir()
        # The worker runs a private copy of exactly the bytes that were screened.
        (work / "impl" / "candidate.py").write_bytes(source)
        run_job = {
            **job,
            "impl": str(work / "impl" / "candidate.py"),
            "channel_key": secrets.token_hex(16),
        }
        write_new(fd, "job.json", json.dumps(run_job).encode())
        yield work, fd, run_job
    finally:
        os.close(fd)
        shutil.rmtree(work, ignore_errors=True)


def _job(task: Task, impl: Path, shape: Shape, dtype: str, device: str) -> dict:
    params = dict(task.spec.params)
    if task.spec.stochastic:
        # Fixed, not drawn: Triton specialises an integer argument by its width and value
        # (a 63-bit seed is an i64, 1234 an i32), so a drawn seed changed the compile facts
        # the agent is shown from run to run (128 vs 196 registers on the flagship). The
        # profile decides no verdict; the judged and timed calls draw theirs.
        params[task.spec.stochastic.seed_param] = 1234
    inputs_file, inputs_func = task.file_and_function("inputs")
    arch = 90
    if device == "cuda":
        import torch

        major, minor = torch.cuda.get_device_capability()
        arch = 10 * major + minor
    return {
        "device": device,
        "impl": str(impl),
        "entry": task.spec.task.entry,
        "model_class": task.model_class(),  # a KernelBench ModelNew may stand for the entry
        "tf32": task.spec.precision.tf32,  # the precision contract (task/torch_precision.py)
        "inputs_file": str(inputs_file),
        "inputs_func": inputs_func,
        "dims": dict(shape.dims),
        "dtype": dtype,
        "params": params,
        "warmup": 2,
        "input_seed": 0,
        "arch": arch,
    }


def _messages(stdout: bytes, key: str) -> list[dict]:
    """The run's channel messages: JSON objects carrying the run's key (ncu's banner lines
    and anything forged are skipped), at most MAX_LINES of them."""
    out = []
    for line in stdout.splitlines()[: MAX_LINES * 4]:
        if len(line) > MAX_LINE_BYTES:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and isinstance(msg.get("type"), str) and msg.get("key") == key:
            out.append(msg)
            if len(out) >= MAX_LINES:
                break
    return out


def _last_line(text: object) -> str:
    lines = [ln for ln in str(text).splitlines() if ln.strip()][-1:] or ["(no message)"]
    return clean(lines[0], 200)


def _check_import(msgs: list[dict], impl: str) -> None:
    for m in msgs:
        if m["type"] == "import_error":
            raise KernelloopError(
                f"{clean(impl, 80)} failed to import in the sandbox "
                f"({_last_line(m.get('error', ''))}); fix it and profile again."
            )


def _device_name(msgs: list[dict]) -> str | None:
    env = next((m.get("env") for m in msgs if m["type"] == "hello"), None)
    name = env.get("device_name") if isinstance(env, dict) else None
    return clean(name, 80) if name else None


def _run_ncu(got: Collected, job: dict, cfg: SandboxConfig, ncu: Path, source: bytes) -> None:
    with _run_dir({**job, "mode": "ncu"}, source) as (work, fd, run_job):
        argv = ncu_command(
            [sys.executable, *WORKER, "--job", str(work / "job.json")], work / "ncu.csv", ncu=ncu
        )
        res = run_sandboxed(
            argv, work, dataclasses.replace(_ncu_config(cfg), rw_paths=[*cfg.rw_paths, work])
        )
        msgs = _messages(res.stdout, run_job["channel_key"])
        _check_import(msgs, job.get("name") or "the candidate")
        got.device_name = _device_name(msgs)
        try:
            text = read_regular(fd, "ncu.csv", MAX_CSV_BYTES).decode(errors="replace")
        except UntrustedFile as e:
            text, unreadable = "", str(e)
        else:
            unreadable = ""
    try:
        got.kernels = parse_ncu_csv(text) if text else []
    except (ValueError, ValidationError, RecursionError) as e:
        got.missing.append(f"Nsight Compute: its report could not be read ({clean(e, 160)})")
        return
    if got.kernels:
        return
    # Known failure text maps to fixed sentences; free text shown is only what the run
    # itself wrote to its report (cleaned), never a file the trusted side would follow to.
    stderr = res.stderr.decode(errors="replace")[-20000:]
    known = diagnose_ncu_failure(
        "\n".join([text, res.stdout.decode(errors="replace")[-20000:], stderr])
    )
    if known is not None:
        why = str(known)
    elif res.timed_out:
        why = f"Nsight Compute did not finish within {cfg.timeout_s:g} s"
    elif unreadable:
        why = f"Nsight Compute's report is unusable ({clean(unreadable, 160)})"
    else:
        last = _last_line(text or "no output")
        why = f"Nsight Compute produced no kernel rows (exit {res.returncode}: {last})"
    got.missing.append(why.rstrip("."))


def _run_facts(got: Collected, job: dict, cfg: SandboxConfig, source: bytes) -> None:
    with _run_dir({**job, "mode": "facts"}, source) as (work, _fd, run_job):
        res = run_sandboxed(
            [sys.executable, *WORKER, "--job", str(work / "job.json")],
            work,
            dataclasses.replace(cfg, rw_paths=[*cfg.rw_paths, work]),
        )
    msgs = _messages(res.stdout, run_job["channel_key"])
    _check_import(msgs, job.get("name") or "the candidate")
    asked = {label for label, _ in job.get("more_shapes", [])}  # the worker names no others
    if job["device"] == "cuda":
        got.device_name = got.device_name or _device_name(msgs)
    for m in msgs:
        if m["type"] == "facts":
            got.facts = _valid(CompileFact, m.get("kernels"), got, "compile facts")
            notes = m.get("notes") if isinstance(m.get("notes"), list) else []
            got.missing += [f"note: {clean(n, 300)}" for n in notes[:10]]
        elif m["type"] == "facts_at" and m.get("shape") in asked and "kernels" in m:
            got.facts_by_shape[m["shape"]] = _valid(
                CompileFact, m.get("kernels"), got, f"compile facts at {m['shape']}"
            )
        elif m["type"] == "timings":
            got.timings = _valid(KernelTiming, m.get("kernels"), got, "kernel timings")
        elif m["type"] == "error":
            got.missing.append(
                f"compile facts: the worker failed ({_last_line(m.get('error', ''))})"
            )
    if res.timed_out:
        got.missing.append(f"compile facts: the worker exceeded {cfg.timeout_s:g} s")
    elif not got.facts and not any(m["type"] == "error" for m in msgs):
        got.missing.append(f"compile facts: the worker returned none (exit {res.returncode})")


def _valid(model, items, got: Collected, what: str) -> list:
    """The worker's list of `model` records, names cleaned; malformed → noted, never raised."""
    if not isinstance(items, list):
        got.missing.append(f"{what}: the worker's report was malformed")
        return []
    out = []
    for item in items[:64]:
        try:
            rec = model.model_validate(item)
        except ValidationError:
            got.missing.append(f"{what}: the worker's report was malformed")
            return []
        rec.name, rec.source = clean(rec.name, 120), clean(rec.source, 40)
        if isinstance(rec, CompileFact):
            rec.arch = clean(rec.arch, 16)
            rec.constexprs = {clean(k, 40): v for k, v in list(rec.constexprs.items())[:32]}
        out.append(rec)
    return out
