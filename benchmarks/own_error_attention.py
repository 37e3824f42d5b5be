"""PyTorch's own float32 attention against float64, and honest float32 attentions against
it, on an imported KernelBench-style attention problem (tests/task/fixtures/
kernelbench_extra/sdpa_attention.py: KernelBench level1/97's op and sizes) — the
measurement behind `model_margin` for imported tasks (issue 33, finding 5: level1/97
rejected honest kernels on its x100 case at the GPU size, where torch's own fp32 attention
misses by the same amount). A benchmark, not a test.

    python benchmarks/own_error_attention.py OUT_PREFIX [--device cpu|cuda] [--seeds 50]
        [--dims 1,2,512,1024] [--cases random,mixed_sign,large_magnitude]

The problem is imported with kernelloop's importer into a temporary folder, and every call
uses the task's own inputs.py (cases random, mixed_sign, large_magnitude) and
reference.py: `model` is that reference on the float32 inputs (the baseline, and what the
judge measures per call), `manual` is softmax(q k^T / sqrt(d)) v in three float32 ops,
`blockwise` an online-softmax over key blocks of 64 (a flash-attention kernel's order).
Per row: the share of the task's tolerance used (max |err| / (atol + rtol |ref|)) over
seeds, its ratio to the model's on the same seed, and how many seeds the judge rejects
under the constant tolerance (old) and under max(1, model_margin x the model's share).
Default dims: the problem's own on cuda, 1x2x512x1024 (two of its heads) on the CPU.
Writes OUT_PREFIX.json and OUT_PREFIX.md (date, device, versions).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import runpy
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "tests" / "task" / "fixtures" / "kernelbench_extra" / "sdpa_attention.py"
CASES = ("random", "mixed_sign", "large_magnitude")


def manual(q, k, v):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v


def blockwise(q, k, v, block=64):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)
    den = torch.zeros_like(m)
    acc = torch.zeros_like(q)
    for j in range(0, k.shape[-2], block):
        s = (q @ k[..., j : j + block, :].transpose(-1, -2)) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, a = torch.exp(s - m_new), torch.exp(m - m_new)
        den = den * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ v[..., j : j + block, :]
        m = m_new
    return acc / den


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--dims", default=None, help="batch,heads,seq,emb")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    sys.path[:0] = [str(ROOT / "src")]
    from kernelloop.task.kernelbench import import_problem
    from kernelloop.task.model_error import used
    from kernelloop.task.spec import Tolerance

    tmp = Path(tempfile.mkdtemp(prefix="own-error-attention-"))
    folder = import_problem(PROBLEM, tmp, ["float32"])
    text = (folder / "task.toml").read_text()
    import tomllib

    t = tomllib.loads(text)["tolerances"]["float32"]
    tol = Tolerance(**t)
    names = ("batch_size", "num_heads", "sequence_length", "embedding_dimension")
    given = a.dims or ("32,32,512,1024" if a.device == "cuda" else "1,2,512,1024")
    dims = dict(zip(names, (int(x) for x in given.split(",")), strict=True))
    make = runpy.run_path(str(folder / "inputs.py"))["make_inputs"]
    reference = runpy.run_path(str(folder / "reference.py"))["reference"]
    impls = {"model": lambda **kw: reference(**kw), "manual": None, "blockwise": None}
    rows = []
    for case in a.cases.split(","):
        per: dict[str, list[tuple[float, float]]] = {k: [] for k in impls}
        t0 = time.monotonic()
        for seed in range(a.seeds):
            g = torch.Generator(device=a.device).manual_seed(seed)
            inp = make(dims, torch.float32, a.device, g, case)
            with torch.no_grad():
                ref = reference(**{k: v.double() for k, v in inp.items()})
                outs = {
                    "model": reference(**inp),
                    "manual": manual(inp["q"], inp["k"], inp["v"]),
                    "blockwise": blockwise(inp["q"], inp["k"], inp["v"]),
                }
            own = used(outs["model"], ref, tol)
            for name, out in outs.items():
                u = used(out, ref, tol)
                per[name].append((u, u / own if own else math.inf))
            del ref, outs, inp
        for name, vals in per.items():
            own = [u for u, _ in per["model"]]
            us = [u for u, _ in vals]
            rows.append(
                {
                    "case": case,
                    "impl": name,
                    "seeds": len(vals),
                    "used_median": sorted(us)[len(us) // 2],
                    "used_max": max(us),
                    "ratio_to_model_max": max(r for _, r in vals),
                    "rejected_constant": sum(u > 1 for u in us),
                    "rejected_with_margin": sum(
                        u > max(1.0, tol.model_margin * o) for u, o in zip(us, own, strict=True)
                    ),
                }
            )
            r = rows[-1]
            print(
                f"{case:16} {name:10} n={r['seeds']} used med {r['used_median']:.3g} max "
                f"{r['used_max']:.3g}  /model max {r['ratio_to_model_max']:.3g}  rejected: "
                f"constant {r['rejected_constant']}, margin {r['rejected_with_margin']}",
                flush=True,
            )
        print(f"  ({time.monotonic() - t0:.1f} s)", flush=True)
    dev = torch.cuda.get_device_name() if a.device == "cuda" else (platform.processor() or "cpu")
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": dev if a.device == "cuda" else f"{dev} ({os.cpu_count()} cores)",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "dims": dims,
        "tolerance": t,
        "command": " ".join(sys.argv),
    }
    a.out.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# Attention's own float32 error (level1/97's op; {meta['date']})", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()] + [""]
    lines += [
        "| case | impl | seeds | tol used (median / max) | / model (max) | rejected: "
        "constant / with margin |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['case']} | {r['impl']} | {r['seeds']} | {r['used_median']:.3g} / "
        f"{r['used_max']:.3g} | {r['ratio_to_model_max']:.3g} | {r['rejected_constant']} / "
        f"{r['rejected_with_margin']} |"
        for r in rows
    ]
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
