"""The trusted side's own torch work on the GPU an evaluation was given (issue #17).

An executor with several GPUs runs several evaluations at once in one process, each on
its own GPU (nvidia-smi's index, PCI order, as `SandboxConfig.gpu_index` takes it). The
sandboxed workers see only that GPU; the trusted side's references, comparisons and
digests must run there too, or every evaluation would crowd GPU 0. `on_gpu(index)` makes
that GPU torch's current device for the calling thread (CUDA's current device is per
thread), so `device="cuda"` in the judge means the evaluation's GPU; `bound_to_gpu` wraps
`evaluate()` and `benchmark()` in it from their `gpu=` argument.

torch numbers the GPUs it can see (CUDA_VISIBLE_DEVICES, in CUDA's order), nvidia-smi
numbers all of them in PCI order: the two are matched by the GPU's UUID.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import torch

from kernelloop.errors import KernelloopError
from kernelloop.sandbox import mounts

P = ParamSpec("P")
R = TypeVar("R")


def _bare(uuid: str) -> str:
    u = uuid.strip().lower()
    return u[4:] if u.startswith("gpu-") else u


def torch_ordinal(index: int) -> int:
    """torch's device number of the GPU nvidia-smi calls `index`."""
    _node, visible = mounts.gpu_device(index)  # SandboxError if the GPU does not exist
    if visible.upper().startswith("GPU-"):
        for i in range(torch.cuda.device_count()):
            if _bare(str(torch.cuda.get_device_properties(i).uuid)) == _bare(visible):
                return i
        raise KernelloopError(
            f"GPU {index} is not visible to this process (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); pass a visible GPU in --gpus."
        )
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if listed and all(p.strip().isdigit() for p in listed.split(",")):
        order = [int(p) for p in listed.split(",")]
        if index in order:
            return order.index(index)
        raise KernelloopError(
            f"GPU {index} is not in CUDA_VISIBLE_DEVICES={listed}; pass a visible GPU in --gpus."
        )
    return index


@contextlib.contextmanager
def on_gpu(index: int | None) -> Iterator[None]:
    """Within it, this thread's torch work on "cuda" runs on GPU `index` (None: unchanged)."""
    if index is None or not torch.cuda.is_available():
        yield
        return
    with torch.cuda.device(torch_ordinal(index)):
        yield


def bound_to_gpu(fn: Callable[P, R]) -> Callable[P, R]:
    """Run `fn` on the GPU named by its `gpu=` keyword argument (absent or None: unchanged)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        gpu = kwargs.get("gpu")
        with on_gpu(gpu if isinstance(gpu, int) else None):
            return fn(*args, **kwargs)

    return wrapper
