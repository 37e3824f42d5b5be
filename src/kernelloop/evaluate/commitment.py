"""A commitment to the exact bytes of one timed output, shared by both sides.

Why: a timing worker runs the candidate's code with full Python, so its timer, its
launch audit and anything it says about its calls are the candidate's to fake. What it
cannot fake is an output it never computed. Every timed call gets inputs of its own
(from a secret seed the trusted side sends with the batch), the worker commits to each
call's output right after the call — inside the batch, under the trusted clock — and
keeps the outputs; after the batch the trusted side picks calls the worker could not
predict, reads their outputs, recomputes the commitments and judges the values against
its own float64 reference. A call that was skipped, replayed or computed cheaply has no
correct output to show that matches what was committed before the choice was made.

The digest on a CPU is SHA-256 of the key and the bytes. On a GPU, where hashing a 256 MB
output on the host per call would cost more than the call, it is computed in one pass on
the device: the
bytes as 32-bit words `w_i`; per lane, with odd multipliers k1, k2, k3 drawn from the
batch's key and all arithmetic mod 2^32, `x = (w_i ^ i·k1)·k2; x ^= x >> 15; x = x·k3;
x ^= x >> 13`, and the lane is the exact sum of the x (int64). Every step is exact integer
arithmetic, so the torch version (any device) and the Triton kernel (the worker's GPU
path: one pass over the output, ~1 ms for 256 MB with int64 modulo, now 32-bit
multiplies) give identical digests. The
residual risk, written down in docs/security.md: a sum of per-element terms can in
principle be steered by a generalised-birthday search over tolerance-sized changes of
many elements; doing that for all lanes inside the audit's deadline is out of scope.
"""

from __future__ import annotations

import functools
import hashlib
import random

import torch

LANES = 4
_BLOCK = 1024


@functools.lru_cache(maxsize=64)
def lane_keys(key: int) -> tuple[tuple[int, int, int], ...]:
    """(k1, k2, k3) per lane, odd multipliers below 2^31 from the batch's key (both sides).
    Below 2^31 and odd, every key reaches the Triton kernel as the same argument type and
    specialisation: one compile per worker, not one per batch (measured on the H200: keys
    that were sometimes above 2^31 recompiled the kernel, ~50 ms per batch). Cached: every
    call of a batch digests under the same key."""
    rng = random.Random(int(key))
    return tuple(tuple(rng.randrange(1, 2**31, 2) for _ in range(3)) for _ in range(LANES))  # type: ignore[misc]


def _words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as int32 words (zero-padded to a multiple of 4 bytes)."""
    b = t.detach().reshape(-1).contiguous().view(torch.uint8)
    if b.numel() % 4:
        b = torch.cat([b, b.new_zeros(4 - b.numel() % 4)])
    elif b.data_ptr() % 4:
        b = b.clone()
    return b.view(torch.int32)


def _text(n_bytes: int, lanes: list[int]) -> str:
    return f"{n_bytes:x}:" + ":".join(f"{x:x}" for x in lanes)


def _mul32(x: torch.Tensor, k: int) -> torch.Tensor:
    """x·k mod 2^32 for 0 ≤ x < 2^32, exact in int64 (no product reaches 2^49)."""
    return ((x & 0xFFFF) * k + ((((x >> 16) * k) & 0xFFFF) << 16)) & 0xFFFFFFFF


def digest_torch(t: torch.Tensor, key: int, chunk: int = 1 << 24) -> str:
    """The digest with torch ops (any device; the trusted side's path on a GPU), over
    `chunk` words at a time: each word's term depends only on the word and its index, so
    the lane sums add up exactly; whole, a 6.4 GB output (KernelBench level1/23) needed
    ~60 GB of int64 temporaries beside the timing workers (H200, 2026-12-01: they ran out)."""
    n_bytes = t.numel() * t.element_size()
    words = _words(t)
    keys = lane_keys(key)
    lanes = [0] * len(keys)
    for start in range(0, words.numel(), chunk):
        w = words[start : start + chunk].to(torch.int64) & 0xFFFFFFFF
        i = (torch.arange(w.numel(), dtype=torch.int64, device=w.device) + start) & 0xFFFFFFFF
        for lane, (k1, k2, k3) in enumerate(keys):
            x = w ^ _mul32(i, k1)
            x = _mul32(x, k2)
            x = x ^ (x >> 15)
            x = _mul32(x, k3)
            x = x ^ (x >> 13)
            lanes[lane] += int(x.sum().item())
        del w, i
    return _text(n_bytes, lanes)


@functools.lru_cache(maxsize=8)
def _key_tensor(key: int, device: str) -> torch.Tensor:
    """The 12 lane keys on `device`, sent once per key: a timed batch commits every call
    under one key (digest_launch per call would otherwise copy them to the GPU each time).
    Only ever read."""
    flat = [x for lane in lane_keys(key) for x in lane]
    return torch.tensor(flat, dtype=torch.int64, device=device)


class Commits:
    """The commitments of a run of outputs under one key, launched on the current stream and
    never waited for: the keys go to the device once, every output's lane sums land in one
    buffer made once, and `texts()` reads them all after the stream is synced. Per output
    the host does one kernel launch of four arguments (a run-through unit of a short kernel
    is made of host time: each launch saved is time the trusted clock does not add)."""

    def __init__(self, key: int, n: int, device) -> None:
        self.keys = _key_tensor(key, str(device))
        self.lanes = torch.zeros((max(n, 1), LANES), dtype=torch.int64, device=device)
        self.sizes: list[int | None] = [None] * n

    def launch(self, j: int, t: torch.Tensor) -> None:
        w = _words(t)
        n = w.numel()
        digest_kernel()[(max(1, -(-n // _BLOCK)),)](w, n, self.keys, self.lanes[j], BLOCK=_BLOCK)
        self.sizes[j] = t.numel() * t.element_size()

    def texts(self) -> list[str]:
        """Every output's digest ("" where none was launched); syncs on the lane sums."""
        rows = self.lanes.tolist()
        return ["" if b is None else _text(b, rows[j]) for j, b in enumerate(self.sizes)]


@functools.cache
def digest_kernel():
    """The Triton digest kernel, imported on first use (it needs triton) and kept: a worker
    loads it before an implementation runs and then never imports it again (no harness
    module reappears in `sys.modules` while a candidate runs: worker/userland.py)."""
    from kernelloop.evaluate.commitment_kernel import digest_kernel as kernel

    return kernel


def digest_launch(t: torch.Tensor, key: int) -> Commits:
    """One output's commitment launched and not waited for (`digest_text` reads it)."""
    c = Commits(key, 1, t.device)
    c.launch(0, t)
    return c


def digest_text(pending: Commits) -> str:
    return pending.texts()[0]


def digest_triton(t: torch.Tensor, key: int) -> str:
    """The same digest in one Triton kernel (the worker's path on a GPU)."""
    return digest_text(digest_launch(t, key))


def digest_cpu(t: torch.Tensor, key: int) -> str:
    """A CPU output's digest: SHA-256 of the key and its bytes (the fastest hash in the
    standard library where the CPU has SHA instructions: ~0.6-1.7 ms per MB measured on
    the 2-core runner; CPU outputs are small)."""
    b = t.detach().reshape(-1).contiguous().view(torch.uint8).numpy()
    h = hashlib.sha256(int(key).to_bytes(8, "little"))
    h.update(b.data)
    return f"{b.size:x}:{h.hexdigest()}"


def digest(t: torch.Tensor, key: int) -> str:
    """The worker's digest of `t`'s bytes under `key`: on a GPU the lane sums (one Triton
    pass), on a CPU SHA-256. The trusted side recomputes it for the same device."""
    if t.is_cuda:
        return digest_triton(t, key)
    return digest_cpu(t, key)


def check_digest(t: torch.Tensor, key: int, device: str) -> str:
    """The trusted side's digest of an output read back from a worker that ran on `device`
    (the lane sums with torch ops on the GPU; SHA-256 on the CPU)."""
    if device == "cuda":
        return digest_torch(t.to("cuda"), key)
    return digest_cpu(t, key)
