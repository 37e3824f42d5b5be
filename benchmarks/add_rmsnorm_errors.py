"""The largest error of examples/add_rmsnorm's honest kernels (baseline and the fused
candidate) against the float64 reference, per dtype, input case and output: the
measurement its tolerances are sized from (docs/task.md, "Writing a task from scratch").
A benchmark, not a test.

    python benchmarks/add_rmsnorm_errors.py OUT.json [--device cpu|cuda] [--seeds 3]

On the CPU the kernels run in the Triton interpreter at the task's CPU shapes (set
TRITON_INTERPRET=1); on CUDA at its GPU shapes."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import runpy
import sys
from pathlib import Path

import torch

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "add_rmsnorm"
CASES = ("random", "large_magnitude", "tiny", "cancellation", "constant_rows")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    sys.path[:0] = [str(EXAMPLE.parents[1] / "src")]
    from kernelloop.task import load_task

    task = load_task(EXAMPLE)
    shapes = [s.dims for s in (task.spec.shapes if a.device == "cuda" else task.spec.cpu_shapes)]
    ref = runpy.run_path(str(EXAMPLE / "reference.py"))["reference"]
    make = runpy.run_path(str(EXAMPLE / "inputs.py"))["make_inputs"]
    impls = {
        "baseline": runpy.run_path(str(EXAMPLE / "baseline.py"))["forward"],
        "fused": runpy.run_path(str(EXAMPLE / "candidates" / "fused.py"))["forward"],
    }
    rows = []
    for dtype in ("bfloat16", "float16", "float32"):
        tol = task.spec.tolerances[dtype]
        for case in CASES:
            worst: dict[tuple[str, int], list[float]] = {}
            for dims in shapes:
                for seed in range(a.seeds):
                    g = torch.Generator(device=a.device).manual_seed(seed)
                    inp = make(dims, getattr(torch, dtype), a.device, g, case)
                    want = ref(**{k: v.double() for k, v in inp.items()}, eps=1e-6)
                    for name, f in impls.items():
                        for i, (o, r) in enumerate(zip(f(**inp, eps=1e-6), want, strict=True)):
                            e = (o.double() - r).abs()
                            used = (e / (tol.atol + tol.rtol * r.abs())).max().item()
                            w = worst.setdefault((name, i), [0.0, 0.0])
                            w[0], w[1] = max(w[0], e.max().item()), max(w[1], used)
            for (name, i), (err, used) in worst.items():
                rows.append(
                    {"dtype": dtype, "case": case, "impl": name, "output": i,
                     "max_abs_err": err, "tolerance_used": used}
                )  # fmt: skip
            print(dtype, case, {f"{n}[{i}]": round(w[1], 3) for (n, i), w in worst.items()})
    dev = torch.cuda.get_device_name() if a.device == "cuda" else platform.processor()
    a.out.write_text(
        json.dumps(
            {
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "device": dev or platform.machine(),
                "torch": torch.__version__,
                "shapes": shapes,
                "seeds": a.seeds,
                "rows": rows,
                "note": "tolerance_used: max |err| / (atol + rtol |ref|); <= 1 passes",
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
