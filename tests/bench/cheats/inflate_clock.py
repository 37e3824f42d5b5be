"""Cheat: patches the worker's timer so that every timed call looks 50 ms longer.

A worker-side timer is reachable from candidate code in the same process; this one
inflates everyone's times (the best's and the baseline's too, which is what a cheat
would want once it also under-reports its own). The trusted side's clock must notice
that the reported time exceeds the time that actually passed."""

import sys
import time

import torch


def _live(name):
    """The harness's live module: out of `sys.modules` while a candidate runs (issue 45),
    the import system still hands it over."""
    try:
        return sys.modules.get(name) or __import__("importlib").import_module(name)
    except ImportError:
        return None


_timing = _live("kernelloop.evaluate.worker.timing")
if _timing is not None:
    _calls = [0]

    def _fake_perf():
        _calls[0] += 1
        return time.perf_counter() + 0.05 * (_calls[0] // 2)

    _timing._perf = _fake_perf


def forward(x, residual, weight, *, eps):
    inv = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return torch.addcmul(residual, x * inv, weight)
