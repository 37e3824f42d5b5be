"""TF32 in Triton's CPU interpreter, as a GPU computes it.

`tl.dot` on float32 tiles runs at TF32 on an NVIDIA GPU unless the kernel asks for
`input_precision="ieee"` (or `allow_tf32=False`): each input is rounded to a 10-bit
mantissa before the tensor cores multiply. Triton's interpreter (3.6) ignores
`input_precision` and multiplies in full float32, so a TF32 kernel passed on the CPU and
failed on the H200 against a task whose precision contract forbids TF32 (issue 34). Here
the interpreter's dot rounds float32 inputs to TF32 (round to nearest even, the rounding
cuBLAS's conversion uses) when the kernel asked for TF32, so the CPU judges the numbers a
GPU would produce. `tf32x3` and `ieee` are left at full float32 (tf32x3 is float32-accurate
to within a few ulp).

This runs inside the worker, before the candidate is imported: it makes the interpreter
stricter, never looser, so a candidate that undoes it only gets past a check it would fail
on a GPU anyway.
"""

from __future__ import annotations

import os

import numpy as np


def round_to_tf32(a: np.ndarray) -> np.ndarray:
    """`a` (float32) rounded to the nearest TF32 value (1 sign, 8 exponent, 10 mantissa
    bits), ties to even; Inf and NaN kept."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    rounded = (bits + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
    finite = np.isfinite(a)
    return np.where(finite, rounded.view(np.float32), a).astype(np.float32)


def install() -> bool:
    """Patch the interpreter's dot where this process interprets Triton; whether it did."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton._C.libtriton import ir
        from triton.runtime import interpreter
    except ImportError:  # a Triton without the interpreter's builder: nothing to patch
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    tf32 = getattr(getattr(ir, "INPUT_PRECISION", None), "TF32", None)
    if builder is None or handle is None or tf32 is None or getattr(builder, "_kl_tf32", False):
        return False
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == tf32 and a.data.dtype == np.float32 and b.data.dtype == np.float32:
            a = handle(round_to_tf32(a.data), a.dtype)
            b = handle(round_to_tf32(b.data), b.dtype)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    builder._kl_tf32 = True
    return True
