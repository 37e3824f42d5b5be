"""Compile facts for every Triton kernel one candidate call launches, with no GPU at all.

The candidate's entry runs once with each `@triton.jit` function's `run` replaced by a
recorder, on meta tensors (shapes and dtypes, no data) when the code allows it. Each
recorded launch is then bound, specialised and compiled for an sm_90 target by Triton's
own launch path (its binder and `_pack_args`), so pointer alignment and integer
divisibility are specialised exactly as on the device. Measured with triton 3.6 on the
flagship's fused kernel at 16384×8192 bf16: 196 registers here, as Nsight Compute reported
on the H200; compiled without those alignment attributes, the same kernel showed 184.

This imports and runs candidate code: call it inside the sandboxed worker only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelloop.errors import KernelloopError
from kernelloop.profile.fallback import CompileFact, _resource_usage, _spills


@dataclass
class Launch:
    kernel: str
    fn: Any  # triton.runtime.jit.JITFunction
    args: tuple
    kwargs: dict
    count: int = 1


@dataclass
class LaunchRecorder:
    """Wraps the Triton kernels of a module so a launch is recorded instead of run."""

    launches: list[Launch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def attach(self, module) -> int:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction

        n = 0
        for attr, obj in list(vars(module).items()):
            kernel = obj
            while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn"):
                if isinstance(kernel, Autotuner) and len(kernel.configs) > 1:
                    # Choosing a config means benchmarking on a device; report the first.
                    self.notes.append(
                        f"{attr} is autotuned over {len(kernel.configs)} configs: facts are for "
                        f"the first ({kernel.configs[0]})"
                    )
                    kernel.configs = kernel.configs[:1]
                kernel = kernel.fn
            if isinstance(kernel, JITFunction) and "run" not in vars(kernel):
                kernel.run = self._recorder(kernel)
                n += 1
        return n

    def _recorder(self, fn) -> Callable[..., None]:
        def run(*args, grid, warmup, **kwargs):
            key = _launch_key(args, kwargs)
            for launch in self.launches:
                if launch.fn is fn and _launch_key(launch.args, launch.kwargs) == key:
                    launch.count += 1
                    return None
            self.launches.append(Launch(kernel=fn.__name__, fn=fn, args=args, kwargs=dict(kwargs)))
            return None

        return run


def _launch_key(args: tuple, kwargs: dict) -> str:
    """Launches that compile to the same binary: same dtypes, same scalar values and options."""

    def one(a: Any) -> str:
        dtype = getattr(a, "dtype", None)
        return f"tensor:{dtype}" if dtype is not None and hasattr(a, "data_ptr") else repr(a)

    return json.dumps([[one(a) for a in args], {k: one(v) for k, v in sorted(kwargs.items())}])


def compile_launch(launch: Launch, arch: int = 90) -> CompileFact:
    """Registers, spills and shared memory of one recorded launch, compiled for sm_`arch`."""
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        from triton.compiler import ASTSource, make_backend
        from triton.runtime.jit import create_function_from_signature
    except ImportError as e:  # the launch internals moved in this Triton version
        raise KernelloopError(
            f"this Triton ({triton.__version__}) lacks the launch internals compile facts use "
            f"({e}); use triton 3.6 or profile on a GPU with Nsight Compute."
        ) from None
    fn = launch.fn
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = {**launch.kwargs, "debug": bool(launch.kwargs.get("debug", False))}
    bound, specialization, options = binder(*launch.args, **kwargs)
    opts, signature, constexprs, attrs = fn._pack_args(
        backend, kwargs, bound, specialization, options
    )
    compiled = triton.compile(
        ASTSource(fn, signature, constexprs, attrs), target=target, options=opts.__dict__
    )
    usage = _resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    # Spills live in the per-thread stack frame: with no stack and no local memory there are
    # none, and the second ptxas pass that counts them (1-2 s for an 8192-wide row) is skipped.
    stores, loads = (
        (0, 0)
        if not usage.get("stack") and not usage.get("local")
        else _spills(compiled.asm["ptx"], arch)
    )
    names = list(signature)
    consts = {
        names[path[0]]: v
        for path, v in constexprs.items()
        if len(path) == 1 and isinstance(v, int | float | bool)
    }
    return CompileFact(
        name=launch.kernel,
        arch=f"sm_{arch}",
        n_regs=usage.get("reg"),
        spill_store_bytes=stores,
        spill_load_bytes=loads,
        stack_bytes=usage.get("stack"),
        shared_bytes=int(compiled.metadata.shared) + usage.get("shared", 0),
        num_warps=opts.num_warps,
        num_stages=opts.num_stages,
        launches=launch.count,
        constexprs=consts,
    )


def record_launches(
    entry: Callable[..., Any],
    make_inputs: Callable[..., dict],
    module,
    dims: dict,
    dtype,
    params: dict,
) -> LaunchRecorder:
    """Run `entry` once with launches recorded: on meta tensors, else (data-dependent code) on
    CPU ones."""
    import torch

    recorder = LaunchRecorder()
    if recorder.attach(module) == 0:
        raise KernelloopError(
            "the candidate defines no @triton.jit kernel at module level; compile facts cover "
            "Triton kernels only (profile a CUDA C++ candidate on a GPU with Nsight Compute)."
        )
    try:
        # generator=None: a meta tensor cannot take a CPU generator, and values do not matter here.
        entry(**make_inputs(dims, dtype, "meta", None, "random"), **params)
        if recorder.launches:
            return recorder
    except Exception as e:  # noqa: BLE001 - data-dependent candidate code cannot run on meta tensors
        recorder.notes.append(f"meta tensors failed ({type(e).__name__}); recorded on CPU tensors")
    recorder.launches.clear()
    g = torch.Generator(device="cpu").manual_seed(0)
    entry(**make_inputs(dims, dtype, "cpu", g, "random"), **params)
    return recorder
