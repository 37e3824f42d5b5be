"""The profile worker: runs inside the sandbox (under Nsight Compute when there is one).

    python -m kernelloop.profile.worker --job JOB.json

Modes (job["mode"]):
- "ncu": draw the task's inputs on the GPU, warm the candidate up (compilation and
  autotuning happen here, outside the range), then run ONE call inside the NVTX push/pop
  range `kernelloop_profile`, which is all `ncu --nvtx-include kernelloop_profile/` profiles.
- "facts": no counters. Record the candidate's Triton launches at the profiled shape
  (meta tensors, nothing runs) and compile each for the job's target arch, then the same
  at each of the job's `more_shapes` (one `facts_at` message each, from a fresh import);
  on a GPU, also time one real call with torch.profiler.

The job comes in a file, not on stdin: ncu sits between the sandbox and this process; it
carries the run's channel key and is deleted before the candidate is imported. Messages go
out as JSON lines on the channel `worker` sets up (a private dup of stdout), each with the
key; the trusted side treats all of it as untrusted and advisory — a profile never decides
a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kernelloop.evaluate.worker import main as worker  # noqa: F401  sets up the channel: import before any candidate code
from kernelloop.evaluate.worker.main import _import_file, _tail, send
from kernelloop.profile.ncu_driver import NVTX_RANGE
from kernelloop.task import torch_precision

torch = worker.torch


def _entry(module, job: dict):
    """The candidate's entry as the evaluation's worker finds it: its function, or on an
    imported KernelBench task its `ModelNew` class as a function (profiling a ModelNew
    answer once failed with "has no attribute 'forward'")."""
    from kernelloop.task.kernelbench_inputs import entry_function

    return entry_function(module, job["entry"], job.get("model_class"))


def _make_inputs(job: dict):
    return getattr(_import_file(job["inputs_file"], "kernelloop_task_inputs"), job["inputs_func"])


def run_ncu(job: dict, fn, module) -> None:
    make_inputs = _make_inputs(job)
    g = torch.Generator(device="cuda").manual_seed(job.get("input_seed", 0))
    inputs = make_inputs(job["dims"], getattr(torch, job["dtype"]), "cuda", g, "random")
    counter = worker.inworker.LaunchCounter()
    counter.attach(module, "candidate")
    for _ in range(job.get("warmup", 2)):
        fn(**inputs, **job["params"])
    torch.cuda.synchronize()
    counter.reset()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    fn(**inputs, **job["params"])
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    send("profiled", launches=counter.snapshot())


def run_facts(job: dict, fn, module) -> None:
    from kernelloop.profile.launches import compile_launch, record_launches

    make_inputs = _make_inputs(job)
    dtype = getattr(torch, job["dtype"])
    recorder = record_launches(fn, make_inputs, module, job["dims"], dtype, job["params"])
    facts = [
        compile_launch(launch, job.get("arch", 90)).model_dump(mode="json")
        for launch in recorder.launches
    ]
    send("facts", kernels=facts, notes=recorder.notes)
    for i, (label, dims) in enumerate(job.get("more_shapes", [])):
        # Each shape from a fresh import (the recorder replaced the kernels' `run`), in
        # this one run: a sandbox and torch per shape cost ~4 s each on a CPU box.
        try:
            mod = _import_file(job["impl"], f"kernelloop_profile_shape_{i}")
            rec = record_launches(_entry(mod, job), make_inputs, mod, dims, dtype, job["params"])
            at = [
                compile_launch(x, job.get("arch", 90)).model_dump(mode="json") for x in rec.launches
            ]
            send("facts_at", shape=label, kernels=at)
        except Exception as e:  # noqa: BLE001 - reported; the other shapes still count
            send("facts_at", shape=label, error=_tail(e))
    if job.get("device") == "cuda":
        from kernelloop.profile.fallback import torch_profiler_timings

        # A fresh import: the recorder replaced the kernels' `run` in the first one.
        real = _import_file(job["impl"], "kernelloop_profile_real")
        g = torch.Generator(device="cuda").manual_seed(job.get("input_seed", 0))
        inputs = make_inputs(job["dims"], dtype, "cuda", g, "random")
        timings = torch_profiler_timings(
            _entry(real, job), warmup=job.get("warmup", 2), **inputs, **job["params"]
        )
        send("timings", kernels=[t.model_dump(mode="json") for t in timings])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelloop.profile.worker")
    ap.add_argument("--job", required=True, type=Path)
    path = ap.parse_args(argv).job
    job = json.loads(path.read_text())
    # The key marks our lines on the channel; the file goes before any candidate code runs.
    worker._key = job.pop("channel_key", "")
    path.unlink(missing_ok=True)
    send("hello", env=worker.inworker.environment(job.get("device", "cpu")))
    torch_precision.pin(bool(job.get("tf32", False)))  # as the evaluation's workers do
    try:
        module = _import_file(job["impl"], "kernelloop_profile_candidate")
        fn = _entry(module, job)
    except BaseException as e:  # noqa: BLE001 - any failure to import is the candidate's
        send("import_error", error=_tail(e))
        return 0
    try:
        (run_ncu if job["mode"] == "ncu" else run_facts)(job, fn, module)
    except BaseException as e:  # noqa: BLE001 - reported; the trusted side says what is missing
        send("error", error=_tail(e))
        return 0
    send("done")
    return 0


if __name__ == "__main__":
    code = main()
    worker._CHANNEL.flush()
    os._exit(code)  # skip atexit hooks a candidate may have registered
