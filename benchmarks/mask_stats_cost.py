"""The cost of the dropout mask's independence tests (values/mask_stats.py) at one mask
size, for this tree's module and, with --against FILE, another version of it, side by
side on the same masks in one process (alternated, best of --repeat).

    python benchmarks/mask_stats_cost.py --rows 4096 --cols 8192 [--device cuda] \\
        [--against /tmp/mask_stats_old.py] [--out benchmarks/results/X/mask_stats.json]

Get an older version with `git show REV:src/kernelloop/evaluate/trusted/values/mask_stats.py
> /tmp/mask_stats_old.py`. Honest masks (uniform, p = 0.1): every test must find nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parents[1] / "src/kernelloop/evaluate/trusted/values/mask_stats.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(fn, device: str) -> tuple[float, object]:
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--against", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    mods = {"this tree": _load(HERE, "ms_new")}
    if a.against:
        mods["against"] = _load(a.against, "ms_old")
    g = torch.Generator(device=a.device).manual_seed(0)
    shape = (a.rows, a.cols)
    d = torch.rand(shape, generator=g, device=a.device) < a.p
    d2 = torch.rand(shape, generator=g, device=a.device) < a.p
    dec = torch.ones(shape, dtype=torch.bool, device=a.device)
    keep = torch.randn(shape, generator=g, device=a.device, dtype=torch.float64)
    drop = torch.randn(shape, generator=g, device=a.device, dtype=torch.float64)
    best: dict[str, dict[str, float]] = {k: {} for k in mods}
    found: dict[str, dict[str, object]] = {k: {} for k in mods}
    for _ in range(a.repeat):
        for name, m in mods.items():  # alternated: the machine's load falls on both
            tests = {
                "lags": lambda m=m: m.lags_problem(d, dec, a.p),
                "related pair": lambda m=m: m.related_problem(d, dec, d2, dec, a.p, "seed + 1"),
                "strata": lambda m=m: m.strata_problem(m.strata_counts(d, dec, keep, drop), a.p),
            }
            for test, fn in tests.items():
                s, out = _time(fn, a.device)
                best[name][test] = min(best[name].get(test, s), s)
                found[name][test] = out
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name()
        if a.device == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "mask": f"{a.rows}x{a.cols}",
        "p": a.p,
        "seconds_best_of": a.repeat,
        "seconds": best,
        "found_on_honest_masks": found,
    }
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
