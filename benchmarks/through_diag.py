"""Why the honest tiled GEMM's run-through units took longer than its events (issue 12,
H200, 2026-12-01): per unit, the trusted-style wall time of the layout GpuSlot.through
uses (inputs made, host wait, units + commitments queued, host wait; host time counts the
unit's call and its commitment's launch, since session 11), the same behind a
GPU sleep that keeps the GPU ahead of the host (host-bound units then hide), the host time
of the launch path alone, and CUDA-event time per call. A benchmark, not a test.

    python benchmarks/through_diag.py OUT.json
"""

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]
from kernelloop.evaluate.commitment import Commits  # noqa: E402

T = ROOT / "examples" / "matmul_bias_gelu"


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


make = load(T / "inputs.py").make_inputs
impls = {
    "candidate": load(T / "candidates" / "fast.py").forward,
    "baseline": load(T / "baseline.py").forward,
}
rows = []
for shape in ["128x4096x4096", "16x8192x8192", "1000x3000x1000", "4096x4096x4096"]:
    m, n, k = map(int, shape.split("x"))
    for name, fn in impls.items():
        g = torch.Generator(device="cuda")
        for _ in range(3):
            g.manual_seed(1)
            fn(**make({"M": m, "N": n, "K": k}, torch.bfloat16, "cuda", g))
        torch.cuda.synchronize()
        res = {"shape": shape, "impl": name}
        for variant in ("through", "behind_sleep", "no_digest"):
            per = []
            hosts = []
            for r in range(4):
                N = 32
                t0 = time.perf_counter()
                sets = []
                for j in range(N):
                    g.manual_seed(100 * r + j)
                    sets.append(make({"M": m, "N": n, "K": k}, torch.bfloat16, "cuda", g))
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                if variant == "behind_sleep":
                    torch.cuda._sleep(20_000_000)  # ~10 ms at 2 GHz
                kept, h = [], 0.0
                commits = Commits(12345, N, "cuda")
                for j, s in enumerate(sets):
                    a = time.perf_counter()
                    out = fn(**s)
                    if variant != "no_digest":
                        commits.launch(j, out)
                    h += time.perf_counter() - a
                    kept.append(out)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                per.append((t2 - t1) * 1e3 / N)
                hosts.append(h * 1e3 / N)
            res[variant + "_unit_ms"] = statistics.median(per)
            res[variant + "_host_ms"] = statistics.median(hosts)
        # events per call, L2 flushed before each
        flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        ev = []
        for j in range(20):
            g.manual_seed(7000 + j)
            s = make({"M": m, "N": n, "K": k}, torch.bfloat16, "cuda", g)
            flush.zero_()
            torch.cuda._sleep(1_000_000)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn(**s)
            e1.record()
            torch.cuda.synchronize()
            ev.append(e0.elapsed_time(e1))
        res["event_ms"] = statistics.median(ev)
        print(json.dumps(res), flush=True)
        rows.append(res)
out = {
    "device": torch.cuda.get_device_name(),
    "torch": torch.__version__,
    "date": time.strftime("%Y-%m-%d"),
    "rows": rows,
}
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
