"""The "compiled" slot's implementation: the task's reference under `torch.compile`.

The trusted side names the reference file and function; this worker imports them like
any implementation and wraps the entry with `torch.compile` (default mode,
`dynamic=False`: one graph per shape, as KernelBench times it). Nothing compiles here:
the first call — the trusted side's untimed `prepare` — traces and compiles, under the
budget the trusted side gives that answer. The environment (trusted/workers.py) points
inductor's and Triton's caches at a folder of this slot's own and sets
`TORCHINDUCTOR_COMPILE_THREADS=1`, so compiling starts no worker pool inside the
sandbox's process limit.

A stochastic task's reference takes its randomness as an explicit keep-mask (see
task/spec.py, `Stochastic`): here the mask is drawn inside the compiled function
(`rand >= p`, shaped like the `output_like` input), so the compiled op is the op with
its dropout, fused by inductor as torch.compile would fuse `F.dropout`.

Dynamo falls back to eager, with only a log line, when a function recompiles more often
than its limit; every shape is a recompile, so the limit is raised and hitting it is an
error: the slot is then dropped, never silently timed eager.
"""

from __future__ import annotations

import torch

RECOMPILE_LIMIT = 64  # shapes (and stochastic seeds) per benchmark, with room


def _raise_limits() -> None:
    import torch._dynamo

    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # the name changed in torch 2.6
        if hasattr(cfg, name):
            setattr(cfg, name, max(int(getattr(cfg, name)), RECOMPILE_LIMIT))
    for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(int(getattr(cfg, name)), 4 * RECOMPILE_LIMIT))
    if hasattr(cfg, "fail_on_recompile_limit_hit"):
        cfg.fail_on_recompile_limit_hit = True
    cfg.suppress_errors = False  # a failed compile is an error, not an eager fallback


def compiled_entry(fn, spec: dict):
    """`fn` (the reference) under torch.compile as the job's `compile` spec says."""
    _raise_limits()
    mask, rate, like = spec.get("mask_param"), spec.get("rate_param"), spec.get("like")
    op = fn
    if mask and rate:
        if not like:
            raise ValueError(
                "the task's reference takes a keep-mask but the task names no output_like "
                "input to shape it"
            )

        def op(**kw):
            p = kw.get(rate) or 0.0
            if p > 0:
                kw[mask] = torch.rand_like(kw[like], dtype=torch.float32) >= p
            return fn(**kw)

    compiled = torch.compile(
        op, mode=spec.get("mode") or None, dynamic=bool(spec.get("dynamic", False))
    )

    def call(**kw):
        try:
            return compiled(**kw)
        except Exception as e:  # noqa: BLE001 - said in one line: the trusted side drops the slot
            raise CompileFailed(_first_line(e)) from None

    return call


class CompileFailed(RuntimeError):
    """torch.compile of the reference failed (inductor's error, its first line)."""


def _first_line(e: BaseException) -> str:
    """The line that says what went wrong: dynamo appends hints about logging after it."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"torch.compile failed: {type(e).__name__}: {lines[0] if lines else ''}"[:400]
