"""The float64 references of a round, computed once and reused by every candidate of it.

A round's candidates are planned under one `Seeds` (plan.py), so they get the same calls
on the same inputs; the reference of a call depends only on the task, the device, its
inputs (input seed, case, shape, dtype) and the keyword arguments the reference receives,
and that is the key here. Nothing in a key or a value comes from a candidate: the trusted
side computes every reference from the secret seed on first use, and the cache lives in
this process only (a worker never sees it). Within one evaluation the same cache serves
the calls that share inputs (a determinism pair, a stochastic rate's calls).

Memory is bounded: a reference is kept only while the cache's total stays within
`max_bytes` (default 256 MiB of host memory on the CPU, 4 GiB of device memory on a
GPU); past that, it is computed for its call and dropped. Nothing is ever evicted, so
when a round's references do not all fit, the ones planned first (the cheap stages: the
compile and smoke calls, the small extreme shapes) stay, and every later candidate still
reuses them in the same order instead of thrashing. A new round makes a new `References`
(new seeds); the old one goes with its last reference.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch

from kernelloop.evaluate.trusted.values.plan import Seeds

CPU_BYTES = 256 << 20
GPU_BYTES = 4 << 30

Refs = dict[str, torch.Tensor]


class References:
    """A round's seeds and the references computed under them (thread-safe: the loop's
    executor may judge several candidates at once)."""

    def __init__(self, seeds: Seeds | None = None, max_bytes: int | None = None) -> None:
        self.seeds = seeds if seeds is not None else Seeds()
        self.max_bytes = max_bytes
        self._refs: dict[tuple, Refs] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.not_kept = 0  # computed and dropped: the cache was full

    def __getstate__(self) -> dict:
        # A job may run in another process or machine (executor/base.py): the seeds travel,
        # the cache does not (it is rebuilt there, empty).
        return {"seeds": self.seeds, "max_bytes": self.max_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["seeds"], state["max_bytes"])

    def budget(self, device: str) -> int:
        if self.max_bytes is not None:
            return self.max_bytes
        return GPU_BYTES if device == "cuda" else CPU_BYTES

    def get(self, key: tuple, device: str, compute: Callable[[], Refs]) -> Refs:
        """The references under `key`, computed by `compute` on first use. Two threads
        asking for the same key at once may both compute it; the first one kept wins."""
        with self._lock:
            found = self._refs.get(key)
            if found is not None:
                self.hits += 1
                return found
            self.misses += 1
        refs = compute()
        size = sum(t.numel() * t.element_size() for t in refs.values())
        with self._lock:
            if key in self._refs:
                return self._refs[key]
            if self.bytes + size > self.budget(device):
                self.not_kept += 1
                return refs
            self._refs[key] = refs
            self.bytes += size
        return refs

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "kept": len(self._refs),
                "bytes": self.bytes,
                "hits": self.hits,
                "misses": self.misses,
                "not_kept": self.not_kept,
            }
