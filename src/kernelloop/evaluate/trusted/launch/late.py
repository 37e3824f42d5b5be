"""A seed check late in a correctness worker's life (issue 45, class 3: call-count drift).

A kernel that is honest for its first N calls in a process and then ignores its seed (or
turns wrong in any other way) passed whenever N exceeded the calls a worker makes (~100
per worker on the flagship's CPU plan). So in one worker of each evaluation the
stochastic suite's last seed group — a call, the same seed again, another seed, on the
same inputs (trusted/values/judge_stochastic.py) — or, for an op without a seed, that
worker's last call, runs only after the candidate has been
called `target` times in that process, `target` drawn per evaluation (`late_range`):
right before the group's first call the worker calls the candidate `burn` more times on
fresh inputs of the plan's smallest shape (outputs dropped; worker/main.py `_burn`), each
with a seed of its own as real use would pass. The candidate cannot tell those calls from
judged ones: same entry, a shape and dtype the plan also judges, fresh inputs and seeds.

Cost on the CPU: each burn call is one interpreted launch on the smallest shape (~10-25 ms
of CPU under Triton's interpreter on the 2-core runner, 2026-12-07); on the flagship's
CPU plan ~100 of them. What this covers, said in docs/security.md: drift after N calls is
caught on every evaluation for N < lo and with probability (hi + 1 - N) / LATE_SPAN up to
hi; past hi it is not caught. The range scales with the plan, so a small test plan pays a
few dozen burn calls, not hundreds.
"""

from __future__ import annotations

import math
import secrets

# The late group's position among the candidate's calls in its worker (1-based), drawn per
# evaluation from [lo, lo + LATE_SPAN): lo is half again the longest worker's calls (at
# least LATE_MARGIN more), so a kernel honest for "a few more calls than a worker makes" is
# caught. The flagship's CPU plan (204 calls, 2 workers of ~100): lo ~156. Twice that, or
# past the whole plan's calls, looked like ~+4 s of the flagship's ~12 s on the shared
# 2-core dev box (2026-12-07; docs/security.md).
LATE_MARGIN = 32
LATE_SPAN = 64
# On a GPU a burn call is one launch on the plan's smallest shape (tens of microseconds plus
# Python's call): the late group comes after at least GPU_LATE_LO calls, drawn over
# GPU_LATE_SPAN, whatever the plan's size — a kernel honest for its first few hundred calls
# is caught there however small the plan (on the CPU the interpreter's ~20 ms a call keeps
# the range to the plan's scale).
GPU_LATE_LO = 1000
GPU_LATE_SPAN = 4000
# ... as long as the burn calls stay within this many elements of input in all: an imported
# KernelBench problem's one shape can be 1.6e9 elements (level1/19), where each burn call
# draws its inputs anew; there the range falls back to the plan's scale.
GPU_BURN_ELEMENTS = 1 << 34


def late_range(parts: list, device: str = "cpu", small: int = 1) -> tuple[int, int]:
    """(lo, hi) inclusive: where the late group may come among a worker's calls (`small`:
    the elements of one burn call)."""
    longest = max((len(p.calls) for p in parts), default=0)
    lo = max(3 * longest // 2, longest + LATE_MARGIN)
    span = LATE_SPAN
    if device != "cpu" and (GPU_LATE_LO + GPU_LATE_SPAN) * small <= GPU_BURN_ELEMENTS:
        lo, span = max(lo, GPU_LATE_LO), GPU_LATE_SPAN
    return lo, lo + span - 1


def late_job(
    calls: list, seed_param: str | None, every: list, span: tuple[int, int], rng=None
) -> dict | None:
    """The job's `late` entry for a worker that runs `calls` (a part of the plan whose calls
    are `every`), or None when it has none to give: run `burn` calls right before call
    `before`, each on inputs of the plan's smallest shape (`dims`, `dtype`) from
    `input_seed + k`, with seed `seed0 + k` where the op takes one. `before` is the last
    seed group's first call (a float32 one where there is one: its masks decide the most
    elements); for an op without a seed, the part's last call (its values are judged
    like any other call's: an op that turns wrong after N calls is caught the same way)."""
    rng = rng or secrets.SystemRandom()
    judged = [i for i, c in enumerate(calls) if c.suite != "e2e"]
    if not judged:
        return None
    firsts = [
        i for i, c in enumerate(calls) if c.suite == "stochastic" and c.role == "a" and c.group
    ]
    wide = [i for i in firsts if calls[i].dtype == "float32"]
    at = (wide or firsts or judged)[-1] if seed_param is not None else judged[-1]
    target = rng.randint(*span)
    small = min(
        (c for c in every if c.suite != "e2e"), key=lambda c: math.prod(c.shape.dims.values())
    )
    return {
        "before": calls[at].id,
        "burn": max(0, target - 1 - at),
        "dims": dict(small.shape.dims),
        "dtype": small.dtype,
        "input_seed": rng.getrandbits(31),
        "params": dict(calls[at].params),
        "seed_param": seed_param,
        "seed0": rng.getrandbits(30),
    }


def late_jobs(
    parts: list, seed_param: str | None, every: list, device: str = "cpu"
) -> dict[int, dict]:
    """{part index: its `late` entry} for one part: of those holding a seed group (any part
    for an op without a seed), the one with the fewest calls (its burn calls then end about
    when the others' judged calls do)."""
    judged = [c for c in every if c.suite != "e2e"]
    small = min((math.prod(c.shape.dims.values()) for c in judged), default=1)
    span = late_range(parts, device, small)
    jobs = {k: j for k, p in enumerate(parts) if (j := late_job(p.calls, seed_param, every, span))}
    grouped = {
        k for k in jobs if any(c.id == jobs[k]["before"] and c.role == "a" for c in parts[k].calls)
    }
    pool = grouped or set(jobs)
    if not pool:
        return {}
    k = min(pool, key=lambda k: len(parts[k].calls))
    return {k: jobs[k]}
