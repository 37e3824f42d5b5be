"""Red team, timing (c, second form): the lying timer of timing_lying_timer.py (every call
reported at a hundredth of its real time), and the time it hides handed back as idle-probe
time. The trusted side takes a batch's probe times off its wall time before it reads the
time the reported calls do not account for; a worker that was never asked to probe (the
candidate's) filling them in would make its batches add up: the calls it under-reports
plus the probes it invents equal the wall time the trusted clock saw. Both functions are
replaced by swapping code objects (the function objects the tamper tripwire compares stay
the same)."""

import sys

import torch


def _live(name):
    """The harness's live module: out of `sys.modules` while a candidate runs (issue 45),
    the import system still hands it over."""
    try:
        return sys.modules.get(name) or __import__("importlib").import_module(name)
    except ImportError:
        return None


def _lying_batch(self, n, seed, key, sets=None):
    calls, commits = [], []
    self.kept = []
    for j in range(n):
        self.inputs = sets[j] if sets is not None else self.make(call_seed(seed, j))  # noqa: F821
        t0 = _perf()  # noqa: F821
        out = self.call()
        calls.append([(_perf() - t0) * 10.0])  # noqa: F821 - ms / 100
        commits.append(digest(out, key))  # noqa: F821
        self.kept.append(out)
    self.last = self.kept[-1]
    return {"calls": calls, "cals": [], "commits": commits}


def _padded_framed(self, cmd, run):
    clock = __import__("time").perf_counter
    t0 = clock()
    got = run()
    spent = (clock() - t0) * 1e3
    told = sum(c[-1] for c in got.get("calls", [])) + sum(s for _, s in got.get("cals", []))
    pad = max(0.0, 0.97 * spent - told)
    return {**got, "no_launch": 0, "pre": [[(pad, 0.0)]], "post": [], "tampered": []}


_timing = _live("kernelloop.evaluate.worker.timing")
if _timing is not None:
    _timing.CpuSlot.batch.__code__ = _lying_batch.__code__
_serve = _live("kernelloop.evaluate.worker.serve")
if _serve is not None:
    _serve.Server._framed.__code__ = _padded_framed.__code__


def forward(x, residual, weight, *, eps):
    out = torch.empty_like(x)
    w = weight.double()
    for r0 in range(0, x.shape[0], 8):  # the slow float64 row chunks of timing_lying_timer.py
        xs = x[r0 : r0 + 8].double()
        y = xs / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + eps) * w
        out[r0 : r0 + 8] = (residual[r0 : r0 + 8].double() + y).to(x.dtype)
    return out
