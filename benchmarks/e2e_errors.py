"""The flagship's `[e2e]` error, over many seeds: what its tolerance is sized from (issue 33,
finding 5: on the H200 the bf16 check, atol 0.25, rejected a kernel byte-identical to
fused_naive at 0.301). A benchmark, not a test.

    python benchmarks/e2e_errors.py OUT_PREFIX [--device cpu|cuda] [--seeds 50]
        [--kernel-seeds 50] [--shapes cpu|gpu|both]

For each e2e shape (the task's `cpu_shapes`/`shapes` of `[e2e]`), dtype and seed it runs
examples/ln_softmax_dropout/e2e.py's model with, as its op:
- `model`: the task's own reference in the judged dtype (inputs as drawn, no upcast) —
  PyTorch's own model in that dtype, what the judge measures on every e2e call when the
  tolerance has a `model_margin` (evaluate/trusted/values/own_error.py);
- the honest kernels `baseline`, `fused_naive`, `fused_philox4` (on the CPU in the Triton
  interpreter: set TRITON_INTERPRET=1; `--kernel-seeds` of them, the interpreter is slow);
- wrong ops (torch, float32, rounded to the dtype once): `no_bias` drops the LayerNorm's
  bias (a dropped term), `scale_1pct` returns softmax x 1.01 (a wrong constant);
and compares the final output with the model on the float64 reference. Per row: the max
abs error and the share of the task's e2e tolerance used (max |err| / (atol + rtol |ref|))
over seeds, the ratio of a kernel's share to the task's own model's share on the same
seed, and how many seeds the judge's rule rejects (used > max(1, margin x the model's)).
Writes OUT_PREFIX.json and OUT_PREFIX.md (date, device, versions).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import runpy
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ln_softmax_dropout"
KERNELS = {
    "baseline": EXAMPLE / "baseline.py",
    "fused_naive": EXAMPLE / "candidates" / "fused_naive.py",
    "fused_philox4": EXAMPLE / "scripted" / "04_fused_philox4.py",
}
WRONG = ("no_bias", "scale_1pct")


def _ops(reference, params):
    """{name: op(**tensors) -> out in the inputs' dtype}."""

    def model(**kw):
        return reference(**kw, **params, seed=0)

    def wrong(kind):
        def op(**kw):
            up = {k: v.to(torch.float32) for k, v in kw.items()}
            if kind == "no_bias":
                up["bias"] = torch.zeros_like(up["bias"])
            out = reference(**up, **params, seed=0)
            return (out * 1.01 if kind == "scale_1pct" else out).to(kw["x"].dtype)

        return op

    ops = {"model": model}
    for name, path in KERNELS.items():
        fwd = runpy.run_path(str(path))["forward"]
        ops[name] = lambda fwd=fwd, **kw: fwd(**kw, **params, seed=0)
    ops.update({w: wrong(w) for w in WRONG})
    return ops


def _used(out, ref, tol) -> tuple[float, float]:
    e = (out.double() - ref).abs()
    return float(e.max()), float((e / (tol.atol + tol.rtol * ref.abs())).max())


def _quantiles(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {
        "median": statistics.median(s),
        "p90": s[min(len(s) - 1, int(0.9 * len(s)))],
        "max": s[-1],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, help="OUT_PREFIX: writes OUT_PREFIX.json and .md")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--kernel-seeds", type=int, default=None, help="default: --seeds")
    ap.add_argument("--shapes", choices=("cpu", "gpu", "both"), default=None)
    ap.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated, or ''")
    a = ap.parse_args()
    sys.path[:0] = [str(ROOT / "src")]
    from kernelloop.task import load_task

    task = load_task(EXAMPLE)
    e2e = task.spec.e2e
    which = a.shapes or ("gpu" if a.device == "cuda" else "cpu")
    shapes = [s.dims for s in e2e.cpu_shapes] if which in ("cpu", "both") else []
    shapes += [s.dims for s in e2e.shapes] if which in ("gpu", "both") else []
    m = runpy.run_path(str(EXAMPLE / "e2e.py"))
    reference = runpy.run_path(str(EXAMPLE / "reference.py"))["reference"]
    params = {**task.spec.params, **e2e.params, "p": 0.0}
    ops = _ops(reference, params)
    params = {**params, "seed": 0}  # the reference ignores it; kernels get it in _ops
    kernels = [k for k in a.kernels.split(",") if k]
    ops = {k: v for k, v in ops.items() if k not in KERNELS or k in kernels}
    kseeds = a.kernel_seeds if a.kernel_seeds is not None else a.seeds
    rows = []
    for dims in shapes:
        for dtype in e2e.dtypes or task.spec.dtypes:
            tol = e2e.tolerances[dtype]
            margin = tol.model_margin
            per: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ops}
            t0 = time.monotonic()
            for seed in range(a.seeds):
                g = torch.Generator(device=a.device).manual_seed(seed)
                inp = m["make_inputs"](dims, getattr(torch, dtype), a.device, g)
                up = {k: v.double() for k, v in inp.items()}

                def op64(**kw):
                    return reference(**{k: v.double() for k, v in kw.items()}, **params)

                with torch.no_grad():
                    ref = m["model"](op64, **up)
                    own = None
                    for name, op in ops.items():
                        if name in KERNELS and seed >= kseeds:
                            continue
                        err, used = _used(m["model"](op, **inp), ref, tol)
                        own = used if name == "model" else own
                        per[name].append((err, used, used / own if own else float("inf")))
            for name, vals in per.items():
                if not vals:
                    continue
                own_used = [u for _, u, _ in per["model"]][: len(vals)]
                rejected = (
                    sum(
                        u > max(1.0, margin * o)
                        for (_, u, _), o in zip(vals, own_used, strict=True)
                    )
                    if margin
                    else None
                )
                rows.append(
                    {
                        "shape": "x".join(str(v) for v in dims.values()),
                        "dtype": dtype,
                        "op": name,
                        "seeds": len(vals),
                        "max_abs_err": _quantiles([e for e, _, _ in vals]),
                        "tolerance_used": _quantiles([u for _, u, _ in vals]),
                        "ratio_to_model": _quantiles([r for _, _, r in vals]),
                        "tolerance": {"atol": tol.atol, "rtol": tol.rtol, "model_margin": margin},
                        "rejected_by_rule": rejected,
                        "rejected_by_constant": sum(u > 1.0 for _, u, _ in vals),
                        "per_seed_used": [round(u, 6) for _, u, _ in vals],
                    }
                )
                r = rows[-1]
                print(
                    f"{r['shape']:>7} {dtype:9} {name:14} n={len(vals):3} "
                    f"err med {r['max_abs_err']['median']:.3g} max {r['max_abs_err']['max']:.3g}"
                    f"  used max {r['tolerance_used']['max']:.3g}  /model max "
                    f"{r['ratio_to_model']['max']:.3g}  rejected {rejected}",
                    flush=True,
                )
            print(f"  ({time.monotonic() - t0:.1f} s)", flush=True)
    _write(a, rows)
    return 0


def _write(a, rows) -> None:
    import triton

    dev = torch.cuda.get_device_name() if a.device == "cuda" else (platform.processor() or "cpu")
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": f"{dev} ({os.cpu_count()} cores)" if a.device == "cpu" else dev,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        "command": " ".join(sys.argv),
        "note": "tolerance_used: max |err| / (atol + rtol |ref|) of the task's [e2e] "
        "tolerance; ratio_to_model: a row's tolerance_used / the task's own model's on the "
        "same seed; rejected_by_rule: seeds with used > max(1, model_margin x model's used)",
    }
    a.out.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# [e2e] error of examples/ln_softmax_dropout ({meta['date']})", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "note"]
    lines += [f"- {meta['note']}", ""]
    lines += [
        "| shape | dtype | op | seeds | max abs err (median / max) | tol used (median / max) "
        "| / model (max) | rejected: constant / with margin |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        e, u, q = r["max_abs_err"], r["tolerance_used"], r["ratio_to_model"]
        lines.append(
            f"| {r['shape']} | {r['dtype']} | {r['op']} | {r['seeds']} | {e['median']:.3g} / "
            f"{e['max']:.3g} | {u['median']:.3g} / {u['max']:.3g} | {q['max']:.3g} | "
            f"{r['rejected_by_constant']} / {r['rejected_by_rule']} |"
        )
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
