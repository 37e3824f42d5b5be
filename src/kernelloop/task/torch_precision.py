"""The task's precision contract applied to PyTorch's own float32 arithmetic.

PyTorch's defaults differ per backend: float32 matmuls run at full precision
(`torch.backends.cuda.matmul.allow_tf32 = False`), but cuDNN convolutions may round their
inputs to TF32 (`torch.backends.cudnn.allow_tf32 = True`). So at PyTorch's defaults a
KernelBench convolution's eager model, its torch.compile slot and the judge's measure of
the model's own error all ran at TF32, while the task's `[precision] tf32 = false` held
the candidate to full float32: the baseline and the compiled slot were timed at a
precision the candidate was not allowed, and the model's own TF32 error widened the
candidate's tolerance (`model_margin`) by the very rounding the contract forbids (the
H200 suite, 2026-12-05: level2/1's torch.compile slot ran at 98% of the float32-accurate
floor).

Every process that runs the task's PyTorch code therefore sets both flags to the
contract: each worker once, before any implementation is imported (worker/main.py; the
baseline's, the compiled slot's and the candidate's alike — a candidate may set them
again for its own calls, and its numbers are judged), and the trusted process around
each run of the task's model in the judged dtype (`pinned`, under one lock: the flags are
process-wide and an executor judges in threads). Only the legacy flags are written:
PyTorch refuses to read them back once the newer `fp32_precision` settings were mixed in.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_LOCK = threading.RLock()


def pin(tf32: bool) -> None:
    """PyTorch's float32 matmuls and cuDNN convolutions at the contract's precision:
    TF32 allowed (`tf32`) or full float32."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


@contextmanager
def pinned(tf32: bool) -> Iterator[None]:
    """`pin(tf32)` for the block, under a process-wide lock; the flags as they were after
    (where PyTorch can still read them)."""
    with _LOCK:
        try:
            before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        except RuntimeError:  # the legacy and newer settings were mixed: nothing to restore
            before = None
        pin(tf32)
        try:
            yield
        finally:
            if before is not None:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
