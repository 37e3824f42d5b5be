"""A candidate's CUDA out-of-memory during correctness: whose fault it is.

The correctness workers share the GPU with each other and with the trusted side, which
computes float64 references at the problem's size. On the H200 (2026-12-03, `kernelloop
gate-check` on KernelBench level1/23's 4096x393216 float32 softmax) an honest rewrite
(num_warps 8 -> 4) was rejected as a crash: "Tried to allocate 6.00 GiB. GPU 0 has a total
capacity of 139.80 GiB of which 3.96 GiB is free ... this process has 18.61 GiB memory in
use" — the worker asked for its output, well within its share; the rest of the card was
held by the harness. That is the machine's doing, not a finding about the candidate.

So: where the worker's own use plus its request fits within one worker's share of the
GPU (`share_bytes`, what `launch/worker_count.gpu_memory_workers` planned for it), the
out-of-memory is the harness's and the call is `internal` (infrastructure: evaluated
again, never charged).
Where it asked for more than its share, it is the candidate's crash, with the numbers.
The text comes from the candidate's worker, so a candidate can forge it: the most a forged
message buys is `internal` — NOT JUDGED, never accepted — so nothing is gained by it.
"""

from __future__ import annotations

import gc
import re
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")

_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError")
_SIZE = r"([\d.]+)\s*(B|KiB|MiB|GiB|TiB)"
_ASKED = re.compile(r"Tried to allocate " + _SIZE)
_IN_USE = re.compile(r"this process has " + _SIZE + r" memory in use")
_CARD = re.compile(r"total capacity of ([\d.]+) GiB of which " + _SIZE + r" is free")
_UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _bytes(m: re.Match | None) -> int | None:
    return None if m is None else int(float(m.group(1)) * _UNIT[m.group(2)])


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def harness_oom(error: str, share_bytes: int | None) -> str | None:
    """Why a worker's out-of-memory `error` is the harness's (the sentence for an `internal`
    verdict), or None when it is not an out-of-memory or the candidate asked for more
    than a worker's share (`share_bytes`; None: unknown, e.g. on the CPU → the candidate's)."""
    if not _OOM.search(error) or share_bytes is None:
        return None
    asked, in_use = _bytes(_ASKED.search(error)), _bytes(_IN_USE.search(error))
    if asked is None or in_use is None or asked + in_use > share_bytes:
        return None
    return (
        f"the GPU ran out of memory while the candidate held {_gib(in_use)} and asked for "
        f"{_gib(asked)}, within a correctness worker's share ({_gib(share_bytes)}): the "
        "judge's references and the other workers held the rest — the machine's doing, not "
        "a finding about the candidate; it is evaluated again"
    )


def trusted_oom(error: str, closed: bool = False, retried: bool = True) -> str | None:
    """The sentence for an `internal` verdict when the trusted side's own work on a call
    (the task's inputs or its float64 reference) ran out of GPU memory, else None: what the
    card held (torch's numbers), that it already tried again, what was not done, and what
    the user can do (`closed`: the task's shapes are fixed, so no smaller ones). KernelBench
    level1/35 at its size was told "while the workers shared the card … it is evaluated
    again … shrink them": not measured, not done, not possible (H100, 2026-12-07)."""
    if not _OOM.search(error):
        return None
    asked, in_use = _bytes(_ASKED.search(error)), _bytes(_IN_USE.search(error))
    card = _CARD.search(error)
    said = []
    if asked:
        said.append(f"asked for {_gib(asked)}")
    if card:
        said.append(f"the card had {card.group(2)} {card.group(3)} free of {card.group(1)} GiB")
    if in_use:
        said.append(f"this process held {_gib(in_use)}")
    return (
        "the trusted side ran out of GPU memory computing the task's inputs or float64 "
        "reference"
        + (f" ({'; '.join(said)})" if said else "")
        + (
            ", again after handing back its cached memory and waiting for the workers"
            if retried
            else ""
        )
        + ": not a finding about the "
        "candidate, which is not judged (`kernelloop run` evaluates it again once); judge "
        "with fewer correctness workers (--workers 1) or on a GPU with more free memory"
        + ("" if closed else ", or at smaller shapes (--shapes)")
    )


OOM_WAIT_S = 2.0  # the workers' memory comes and goes with their calls


def retry_out_of_memory(fn: Callable[[], T], device: str) -> T:
    """`fn()` (the judge's own GPU work on a call: the task's inputs, the float64
    reference), once more when it runs out of GPU memory: this process's cached blocks go
    back to the driver and the workers beside it get OOM_WAIT_S to finish their calls. The
    card's numbers from torch's message go to this process's log (who held the memory). A
    second out-of-memory propagates (the caller makes it `internal`)."""
    try:
        return fn()
    except torch.cuda.OutOfMemoryError as e:
        if device != "cuda":
            raise
        message = str(e)
    # past the handler: the failed attempt's frames, and the tensors they held, are gone
    print(
        f"kernelloop: the judge ran out of GPU memory ({message.strip()[:600]}); "
        "releasing its cached blocks and trying once more",
        file=sys.stderr,
    )
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    time.sleep(OOM_WAIT_S)
    return fn()


def release_cached_gpu_memory() -> None:
    """Hand the blocks PyTorch's caching allocator keeps for this process back to the
    driver, after an evaluation: its float64 references at a problem's size are tens of
    GiB (level1/23: 56.6 GiB held after one evaluation on the H200, 2026-12-03), and the
    next evaluation's workers and references need them. Live tensors (a round's reference
    cache) stay."""
    if torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


# The trusted side's float64 references at a problem's size are large (level1/23's softmax:
# 12.9 GB an input, as much an output) and PyTorch's caching allocator keeps the blocks of
# a judged call reserved for this process: the workers sharing the GPU then run out
# (oom.py). Past this much reserved-but-unused memory it goes back to the driver.
RELEASE_BYTES = 1 << 30


def release_reserved(device: str) -> None:
    """Hand reserved-but-unused GPU blocks back to the driver past RELEASE_BYTES."""
    if device != "cuda":
        return
    try:
        if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > RELEASE_BYTES:
            torch.cuda.empty_cache()
    except RuntimeError:  # no CUDA context in this process: nothing to release
        pass
