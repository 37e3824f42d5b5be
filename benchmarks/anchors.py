"""Reproduce shared/GPU.md's anchors for the flagship op (bf16, p = 0.1) on a GPU.

Three implementations per shape, in GPU.md's shape order:
- floor: `torch.add(x, residual, out=o)`, which moves exactly the op's minimal bytes;
- eager: layer_norm → softmax → dropout → + residual (4 kernels);
- compile: torch.compile of the eager function (default mode, one compiled function
  across the shapes, so later shapes run whatever the recompiles produce, as in GPU.md).
Each is timed with `triton.testing.do_bench` (median, the method GPU.md used) and with
kernelloop's own worker timer (interleaved, flushed, device-synced). The JSON says, per
shape and implementation, both numbers and the ratio to GPU.md's table.

    python3 benchmarks/anchors.py --out anchors.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

# shared/GPU.md, "Ceilings and anchors", do_bench medians in ms (H200, 2026-11-29).
GPU_MD = {
    "16384x8192": {"floor": 0.189, "eager": 1.133, "compile": 0.787},
    "16384x8000": {"floor": 0.185, "eager": 1.125, "compile": 1.149},
    "4096x8000": {"floor": 0.052, "eager": 0.301, "compile": 0.309},
    "65536x1024": {"floor": 0.098, "eager": 0.468, "compile": 0.787},
    "1024x32768": {"floor": 0.054, "eager": 0.266, "compile": 0.346},
}
TOLERANCE = 0.05


def eager(x, residual, weight, bias, o, *, p=0.1, eps=1e-5):
    y = F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    return residual + F.dropout(torch.softmax(y, dim=-1), p, training=True)


def floor(x, residual, weight, bias, o, **_):
    return torch.add(x, residual, out=o)


def make_inputs(dims, dtype, device, g, case="random"):
    rows, cols = dims["rows"], dims["cols"]
    x = torch.randn((rows, cols), generator=g, device=device).to(dtype)
    r = torch.randn((rows, cols), generator=g, device=device).to(dtype)
    w = (1 + 0.1 * torch.randn((cols,), generator=g, device=device)).to(dtype)
    b = (0.1 * torch.randn((cols,), generator=g, device=device)).to(dtype)
    return {"x": x, "residual": r, "weight": w, "bias": b, "o": torch.empty_like(x)}


def main() -> None:
    # The timer's method in one process (benchmarks/inprocess_timer.py).
    import triton.testing
    from inprocess_timer import time_impls

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=",".join(GPU_MD))
    args = ap.parse_args()
    compiled = torch.compile(eager)
    fns = {"floor": floor, "eager": eager, "compile": compiled}
    rows = []
    t_all = time.monotonic()
    for label in args.shapes.split(","):
        r, c = (int(v) for v in label.split("x"))
        dims = {"rows": r, "cols": c}
        g = torch.Generator(device="cuda").manual_seed(0)
        inp = make_inputs(dims, torch.bfloat16, "cuda", g)
        t0 = time.monotonic()
        compiled(**inp)  # compile (or recompile) outside every measurement
        torch.cuda.synchronize()
        compile_s = time.monotonic() - t0
        db = {
            n: triton.testing.do_bench(
                lambda f=f, i=inp: f(**i), warmup=25, rep=100, return_mode="median"
            )
            for n, f in fns.items()
        }
        job = {
            "device": "cuda",
            "params": {},
            "timing": {
                "shapes": [{"dims": dims, "label": label}],
                "dtype": "bfloat16",
                "impls": list(fns),
                "params": {},
                "input_seed": 7,
                "reps": 100,
                "min_reps": 20,
                "max_s_per_shape": 1.5,
                "graphs": False,
            },
        }
        ours = {m["impl"]: m["median_ms"] for m in time_impls(job, fns, make_inputs)}
        for n in fns:
            ref = GPU_MD.get(label, {}).get(n)
            rows.append(
                {
                    "shape": label,
                    "impl": n,
                    "do_bench_ms": round(db[n], 5),
                    "kernelloop_ms": round(ours[n], 5),
                    "gpu_md_ms": ref,
                    "ratio_do_bench": round(db[n] / ref, 4) if ref else None,
                    "within_5pct": bool(ref and abs(db[n] / ref - 1) <= TOLERANCE),
                    "compile_s": round(compile_s, 2) if n == "compile" else None,
                }
            )
    props = torch.cuda.get_device_properties(0)
    out = {
        "device": props.name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "tolerance": TOLERANCE,
        "wall_s": round(time.monotonic() - t_all, 1),
        "rows": rows,
        "all_within": all(x["within_5pct"] for x in rows if x["gpu_md_ms"]),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"{'shape':<12}{'impl':<9}{'do_bench':>10}{'ours':>10}{'GPU.md':>9}{'ratio':>8}")
    for x in rows:
        print(
            f"{x['shape']:<12}{x['impl']:<9}{x['do_bench_ms']:>10.4f}{x['kernelloop_ms']:>10.4f}"
            f"{x['gpu_md_ms'] or 0:>9.3f}{x['ratio_do_bench'] or 0:>8.3f}"
        )


if __name__ == "__main__":
    main()
