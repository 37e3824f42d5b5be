"""Crashes the interpreter with a segmentation fault."""

import ctypes


def forward(x, residual, weight, bias, *, p, eps, seed):
    ctypes.string_at(0)
