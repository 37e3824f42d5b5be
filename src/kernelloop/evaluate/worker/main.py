"""The worker: runs inside the sandbox, imports the candidate and calls it.

Everything this process reports is untrusted: the trusted side regenerates the inputs,
computes the reference and compares the output bytes itself. The worker's job is only
to produce those bytes honestly when the candidate is honest, and to record facts
(types, aliasing, launches, torch ops) that a lazy cheat would otherwise hide.

A correctness worker never times anything: timing runs in timing workers (one per
implementation, `"mode": "timing"` in the job, worker/serve.py), after correctness.

Protocol: a job (JSON) on stdin; JSON lines on the original stdout (the channel);
the candidate's own prints go to stderr. Outputs go into the job's shared output slots
(worker/outbox.py) where it has them and they fit; otherwise they are written as raw
bytes to `out_dir/<call id>.bin`, at most `max_outstanding` unread files at once (the
trusted side deletes each after reading), which bounds the disk/RAM used.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

# The channel is a private dup of stdout; fd 1 then points at stderr so that prints by
# the candidate cannot be mistaken for protocol lines.
_CHANNEL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr


_dumps = json.dumps
_key = ""  # the job's channel key: lines without it are rejected as forged


def send(kind: str, **payload) -> None:
    _CHANNEL.write(_dumps({"type": kind, **payload, "key": _key}) + "\n")
    _CHANNEL.flush()


import torch  # noqa: E402  (after the channel is set up)

from kernelloop.evaluate.worker import calls as inworker  # noqa: E402  (after the channel is set up)
from kernelloop.evaluate.worker import e2e as e2e_model  # noqa: E402
from kernelloop.evaluate.worker import (  # noqa: E402  (timing binds its clocks before candidates load)
    gpu_device,
    gpu_timer,
    guard,
    interp_tf32,
    op_audit,
    serve,
    timing,
    userland,
)
from kernelloop.evaluate.worker import outbox as outbox_mod  # noqa: E402
from kernelloop.task import torch_precision  # noqa: E402
from kernelloop.task.generic_cases import with_generic_cases  # noqa: E402
from kernelloop.task.kernelbench_inputs import PREPARE, entry_function  # noqa: E402

guard.drop_cwd_from_path()
_MARKER = f"KERNELLOOP_SANDBOX_ID={os.environ.get('KERNELLOOP_SANDBOX_ID', '')}"

# Bound before any candidate code runs: a candidate that patches torch.cuda later
# cannot change what the harness calls.
_sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
_equal = torch.equal
_Tensor = torch.Tensor


def _import_file(path: str, name: str):
    """Run a file as module `name` from its source text: a `__pycache__/*.pyc` beside it is
    never used in its place (the task's input generator must be the source the trusted
    side hashed and runs itself), and no bytecode is written."""
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(code, module.__dict__)  # noqa: S102
    return module


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def run_call(
    job: dict, call: dict, fn, make_inputs, counter: inworker.LaunchCounter, watch: dict
) -> None:
    dev = job["device"]
    dtype = _dtype(call["dtype"])
    g = torch.Generator(device=dev).manual_seed(call["input_seed"])
    inputs = make_inputs(call["dims"], dtype, dev, g, call["case"])
    inputs = _refilled(call, inputs, watch)
    if (prepare := PREPARE.get(fn)) is not None:  # a solution class, built for this size
        prepare(**inputs)
    tensors = {k: v for k, v in inputs.items() if isinstance(v, _Tensor)}
    snapshot = {k: v.clone() for k, v in tensors.items()}
    # Poison as much fresh memory as the output will take (or, where the task derives the
    # output from the reference, as the largest input): a kernel that never writes its
    # output reads poison, not a lucky earlier result.
    sizes = [t.numel() * t.element_size() for t in tensors.values()]
    name = job.get("output_like")
    like_bytes = sizes and max(sizes)
    if name and not call.get("e2e"):  # the model's inputs are not the entry's
        like_bytes = tensors[name].numel() * tensors[name].element_size()
    inworker.poison(like_bytes or 0, dev)
    kwargs = {**job["params"], **call["params"]}
    userland.HIDER.hide()  # an input generator's lazy import of a harness module, out of sight
    counter.reset()
    audited: dict = {"ops": {}}
    t0 = time.perf_counter()
    if call.get("audit"):
        count = dev == "cuda" and bool(call.get("count_kernels"))
        with inworker.OpAudit(counter, device_kernels=count) as audit:
            out = fn(**inputs, **kwargs)
            _sync()
        audited = audit.facts()
    else:
        out = fn(**inputs, **kwargs)
        _sync()
    # What the output holds the moment the call returns is what gets judged; work that
    # lands later (a thread, a deferred launch) shows up as a difference below.
    parts = inworker.output_parts(out)
    at_return = inworker.packed(parts).clone() if parts is not None else None
    _sync()
    elapsed = time.perf_counter() - t0
    facts: dict = {
        "id": call["id"],
        "elapsed_s": elapsed,
        "launches": counter.snapshot(),
        **audited,
        "tampered": watch["integrity"].changed(),
        "threads": len(guard.new_threads(watch["threads"])),
    }
    facts["out_type"] = f"{type(out).__module__}.{type(out).__qualname__}"
    if at_return is None:
        send("call", ok=True, **facts)  # the trusted side rejects the type (interface)
        return
    prev = watch.get("previous") or []
    first = parts[0]
    aliases = [a for p in parts for a in inworker.aliased_inputs(p, tensors)]
    for i, p in enumerate(parts):  # two outputs sharing memory
        others = {f"output {j}": q for j, q in enumerate(parts) if j != i}
        if inworker.aliased_inputs(p, others):
            aliases.append(f"output {i}")
    facts.update(
        out_shape=list(first.shape),
        out_dtype=str(first.dtype).removeprefix("torch."),
        out_device=first.device.type,
        out_contiguous=first.is_contiguous(),
        out_parts=[
            {
                "shape": list(p.shape),
                "dtype": str(p.dtype).removeprefix("torch."),
                "device": p.device.type,
                "contiguous": p.is_contiguous(),
            }
            for p in parts
        ],
        aliases=list(dict.fromkeys(aliases)),
        mutated=[k for k in tensors if not inworker.same_bytes(snapshot[k], tensors[k])],
        # The previous outputs are still held here, so an honest allocation cannot overlap.
        reuses_output=any(
            inworker.aliased_inputs(p, {f"previous {j}": q for j, q in enumerate(prev)})
            for p in parts
        ),
    )
    watch["previous"] = parts
    if call.get("save", True):
        outbox = watch.get("outbox")
        flat = at_return.reshape(-1).view(torch.uint8)
        if outbox is not None and outbox.fits(flat.numel()):
            facts["slot"] = outbox.put(flat)  # synchronised below, before it is reported
        else:
            path = Path(job["out_dir"]) / f"{call['id']}.bin"
            inworker.wait_for_room(Path(job["out_dir"]), job.get("max_outstanding", 4))
            inworker.write_raw(at_return, path)
            facts["file"] = path.name
    _sync()
    facts["changed_after_return"] = not inworker.same_bytes(at_return, inworker.packed(parts))
    send("call", ok=True, **facts)


def _refilled(call: dict, inputs: dict, watch: dict) -> dict:
    """A determinism group's `refill` call runs in the very tensors its first call had
    (same storage, same data_ptr), their values overwritten with this call's inputs: a
    kernel that caches its output by input address returns the first call's output and
    fails (trusted/values/judge_state.py). The first call's inputs are kept (`keep_inputs`) only
    until then: the plan puts the refill right after it."""
    kept = watch.pop("kept", None)
    if call.get("keep_inputs"):
        watch["kept"] = inputs
    if not call.get("refill") or kept is None:
        return inputs
    out = dict(inputs)
    for k, v in inputs.items():
        old = kept.get(k)
        if (
            isinstance(v, _Tensor)
            and isinstance(old, _Tensor)
            and old.shape == v.shape
            and old.dtype == v.dtype
            and old.stride() == v.stride()
        ):
            old.copy_(v)
            out[k] = old
    _sync()
    return out


def main() -> int:
    global _key
    job = json.loads(sys.stdin.read())
    _key = job.pop("channel_key", "")
    # The task's precision contract for every implementation this worker imports (the
    # baseline's convolutions ran at cuDNN's TF32 default otherwise): task/torch_precision.py.
    torch_precision.pin(bool(job.get("tf32", False)))
    if job.get("mode") == "timing":
        harness = [
            sys.modules[__name__],
            inworker,
            op_audit,
            timing,
            gpu_timer,
            gpu_device,
            guard,
            serve,
            outbox_mod,
        ]
        return profiled(job, serve.serve, job, send, harness, _MARKER)
    return profiled(job, _correctness, job)


def profiled(job: dict, fn, *args) -> int:
    """`fn(*args)`; under cProfile where the job asks (a developer's diagnosis:
    benchmarks/worker_profile.py, correctness_profile.py), its profile written into the
    worker's own folder when `fn` ends. Set only by the trusted side. It lives here, not in
    serve.py: a correctness worker's stack must not pass through the timing modules (the
    red team's timing_knows_it_is_timed.py tells timing from correctness by them)."""
    if not job.get("cprofile"):
        return fn(*args)
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        return fn(*args)
    finally:
        prof.disable()
        prof.dump_stats(str(Path(job["out_dir"]).parent / "worker.prof"))


def _correctness(job: dict) -> int:
    send("hello", env=inworker.environment(job["device"]))
    make_inputs = with_generic_cases(
        getattr(_import_file(job["inputs_file"], "kernelloop_task_inputs"), job["inputs_func"])
    )
    e2e = e2e_model.load(job, _import_file)  # the task's [e2e] model (trusted), if any
    interp_tf32.install()  # the CPU interpreter's tl.dot at TF32 where a GPU's would be
    # Snapshots taken before any candidate code runs (see guard.py).
    watch = {
        "integrity": guard.Integrity(
            [sys.modules[__name__], inworker, op_audit, timing, gpu_timer, gpu_device, guard]
        ),
        "threads": guard.thread_baseline(),
        # The shared output slots, opened before any candidate code runs (files without).
        "outbox": outbox_mod.open_outbox(job, lambda m: print(m, file=sys.stderr)),
    }
    impls = {}
    counter = inworker.LaunchCounter()
    for name, path in job["impls"].items():
        try:
            module = userland.import_as_user(path)  # as a user's `import <stem>` would
            fn = entry_function(module, job["entry"], job.get("model_class"))
        except BaseException as e:  # noqa: BLE001 - any failure to import is the candidate's
            send("import_error", impl=name, error=_tail(e), compiler=inworker.compiler_raised(e))
            return 0
        counter.attach(module, name)
        impls[name] = (module, fn)
    _report_tamper(watch, "import")
    cand_fn = impls["candidate"][1]
    late = job.get("late") or {}
    for call in job["calls"]:
        fn, inputs = cand_fn, make_inputs
        if call.get("e2e") and e2e is not None:
            # The model calls the candidate as its op; its final output is this call's.
            names = {*job["params"], *call["params"]}
            fn, inputs = e2e_model.bind(e2e[0], cand_fn, names), e2e_model.make_inputs(e2e[1])
        try:
            if call["id"] == late.get("before"):
                _burn(job, late, cand_fn, make_inputs)
            run_call(job, call, fn, inputs, counter, watch)
        except BaseException as e:  # noqa: BLE001 - reported, then the trusted side rejects
            send(
                "call",
                id=call["id"],
                ok=False,
                error=_tail(e),
                compiler=inworker.compiler_raised(e),
            )
            if inworker.sticky_cuda_error(e):
                send("fatal", error="sticky CUDA error: the worker cannot continue")
                return 0
    watch.pop("previous", None)
    send(
        "compile",
        kernels=inworker.compile_facts({k: v[0] for k, v in impls.items()}, job["device"]),
    )
    strays = guard.stray_processes(bool(job.get("private_pid_namespace")), _MARKER)
    if strays:
        send("processes", found=strays[:10], count=len(strays))
    send("done")
    return 0


def _burn(job: dict, late: dict, fn, make_inputs) -> None:
    """The calls before a late seed check (trusted/launch/late.py): the candidate called
    `burn` times on fresh inputs of a judged shape, each with a seed of its own, outputs
    dropped. A failure here is the next call's (reported by the caller)."""
    dev, dtype = job["device"], _dtype(late["dtype"])
    params = {**job["params"], **late["params"]}
    for k in range(int(late["burn"])):
        g = torch.Generator(device=dev).manual_seed(int(late["input_seed"]) + k)
        inputs = make_inputs(late["dims"], dtype, dev, g, "random")
        if (prepare := PREPARE.get(fn)) is not None:
            prepare(**inputs)
        if late.get("seed_param"):
            params[late["seed_param"]] = int(late["seed0"]) + k
        userland.HIDER.hide()
        fn(**inputs, **params)
    _sync()


def _report_tamper(watch: dict, when: str) -> None:
    changed = watch["integrity"].changed()
    if changed:
        send("tamper", when=when, changed=changed[:10])


def _tail(e: BaseException) -> str:
    return inworker.error_tail(e)
