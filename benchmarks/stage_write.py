"""How fast can a worker put one output into the evaluation's RAM-backed scratch folder?
(issue 13: on the H200 the correctness worker's writes set the pace of the full stage.)
A benchmark, not a test.

One output of `--mib` MiB (default 512: the flagship's largest fp32 output) on the GPU
(or the CPU without one) is written to a file under `--dir` (default /dev/shm) by:
- `write`: what the worker does today (evaluate/worker/calls.py): two page-locked 64 MiB
  buffers, the GPU copies into one while the other is written with os.write;
- `mmap-tN`: the file sized with ftruncate and mapped; each 64 MiB chunk copied from the
  page-locked buffer into the mapping by torch with N intra-op threads;
- `mmap-populate-tN`: the same with the mapping's pages made up front (MAP_POPULATE).
Each method `--repeats` times (median GB/s); the file is removed between runs.

    python benchmarks/stage_write.py OUT.json [--mib 512] [--repeats 5] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import statistics
import time
from pathlib import Path

import torch

CHUNK = 64 << 20


def _pinned() -> torch.Tensor:
    cuda = torch.cuda.is_available()
    return torch.empty(CHUNK, dtype=torch.uint8, pin_memory=cuda)


def write_plain(src: torch.Tensor, path: Path, stage: list[torch.Tensor]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for a in range(0, src.numel(), CHUNK):
            n = min(CHUNK, src.numel() - a)
            buf = stage[(a // CHUNK) % 2]
            buf[:n].copy_(src[a : a + n])
            view = memoryview(buf.numpy())[:n]
            while len(view):
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_mmap(
    src: torch.Tensor, path: Path, stage: list[torch.Tensor], threads: int, populate: bool
) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        size = src.numel()
        os.ftruncate(fd, size)
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        m = mmap.mmap(fd, size, flags=flags)
        try:
            dst = torch.frombuffer(m, dtype=torch.uint8)
            for a in range(0, size, CHUNK):
                n = min(CHUNK, size - a)
                buf = stage[(a // CHUNK) % 2]
                buf[:n].copy_(src[a : a + n])
                dst[a : a + n].copy_(buf[:n])
            del dst
        finally:
            m.close()
    finally:
        torch.set_num_threads(before)
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    src = torch.randint(0, 255, (args.mib << 20,), dtype=torch.uint8, device=dev)
    stage = [_pinned(), _pinned()]
    methods = {"write": lambda p: write_plain(src, p, stage)}
    for t in (1, 2, 4, 8):
        methods[f"mmap-t{t}"] = lambda p, t=t: write_mmap(src, p, stage, t, False)
        methods[f"mmap-populate-t{t}"] = lambda p, t=t: write_mmap(src, p, stage, t, True)
    path = args.dir / f"stage-write-{os.getpid()}.bin"
    result = {
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "mib": args.mib,
        "dir": str(args.dir),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gb_per_s": {},
    }
    for name, fn in methods.items():
        rates = []
        for _ in range(args.repeats):
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(path)
            rates.append((args.mib << 20) / (time.perf_counter() - t0) / 1e9)
            path.unlink()
        result["gb_per_s"][name] = round(statistics.median(rates), 2)
        print(f"{name:22s} {result['gb_per_s'][name]:6.2f} GB/s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
