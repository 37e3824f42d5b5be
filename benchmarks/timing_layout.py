"""Issue 12 on the H200: the new timing layout against the old in-process timer, same kernels.

    python3 benchmarks/timing_layout.py --out "$OUT/timing_layout.json" [--runs 3]

The honest fused candidate (examples/ln_softmax_dropout/candidates/fused_naive.py) against
the baseline, on the 5 GPU shapes in bf16:
- new: `benchmark()` — one sandboxed worker per implementation (candidate, baseline, and
  the baseline's A/A copy), driven one at a time by the trusted side;
- old: benchmarks/inprocess_timer.py — the same method with every implementation in one
  process (the timer as it was), with the benchmark's settings;
alternated `--runs` times in one process, so drift falls on both. Prints per-shape medians
of each layout, the new/old ratio per kernel (acceptance: within 2%), the A/A spread, the
wall times, the idle probe's calibration and the worst probe seen, and the gate's verdict;
writes everything to one JSON file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from pathlib import Path

import torch
from inprocess_timer import time_impls, timing_spec

from kernelloop.evaluate.trusted.bench import benchmark
from kernelloop.evaluate.trusted.clock.interleave import Session
from kernelloop.gate import performance_gate
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "ln_softmax_dropout"
FUSED = TASK / "candidates" / "fused_naive.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(os.environ.get("OUT", ".")) / "timing_layout.json"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--device", default="cuda", help="cpu: a smoke test of this script (interpreter timings)"
    )
    ap.add_argument(
        "--shapes", default=None, help="comma-separated labels (default: the 5 GPU shapes)"
    )
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    task = load_task(TASK)
    shapes = (
        [task.find_shape(s) for s in args.shapes.split(",")]
        if args.shapes
        else list(task.spec.shapes)
    )
    dtype = "bfloat16" if args.device == "cuda" else "float32"
    outcomes = []
    real_run = Session.run

    def keep(self):  # the session's outcome carries the idle-probe statistics
        out = real_run(self)
        outcomes.append(out)
        return out

    Session.run = keep
    fused = _load(FUSED, "kl_fused").forward
    base = _load(task.baseline_path, "kl_base").forward
    make_inputs = _load(TASK / "inputs.py", "kl_inputs").make_inputs
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    result: dict = {"device": name, "torch": torch.__version__, "runs": []}

    def save() -> None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))

    for run in range(args.runs):
        t0 = time.monotonic()
        rec = benchmark(
            task,
            FUSED,
            dtype=dtype,
            device=args.device,
            shapes=args.shapes or "gpu",
            reps=None if args.device == "cuda" else 3,
        )
        gate = performance_gate(rec, task.spec.rules)
        new = {s.shape: {n: it.median_ms for n, it in s.impls.items()} for s in rec.shapes}
        new_aa = {s.shape: s.aa_rel_diff for s in rec.shapes}
        new_wall = time.monotonic() - t0
        t0 = time.monotonic()
        spec = timing_spec(
            shapes,
            dtype,
            ["candidate", "baseline"],
            args.device,
            "baseline",
            [],
            reps=None if args.device == "cuda" else 3,
            params={"seed": 1234},
        )
        spec["input_seed"], spec["order_seed"] = 7 + run, 11 + run
        job = {"device": args.device, "params": dict(task.spec.params), "timing": spec}
        old_msgs = list(time_impls(job, {"candidate": fused, "baseline": base}, make_inputs))
        old_wall = time.monotonic() - t0
        old: dict = {}
        for m in old_msgs:
            old.setdefault(m["shape"], {})[m["impl"]] = m["median_ms"]
        out = outcomes[-1] if outcomes else None
        entry = {
            "new_wall_s": round(new_wall, 2),
            "new_timing_phase_s": rec.timing_phase_s,
            "old_wall_s": round(old_wall, 2),
            "problems": rec.problems,
            "warnings": rec.warnings,
            "method": rec.method,
            "gate": {
                "accepted": gate.accepted,
                "category": gate.category,
                "objective": gate.objective,
                "reasons": gate.reasons,
            },
            "idle": out.idle if out else {},
            "shapes": {},
        }
        for label in new:
            ratios = {
                n: new[label][n] / old[label][n] for n in new[label] if n in old.get(label, {})
            }
            old_aa = (
                abs(old[label]["baseline#aa"] - old[label]["baseline"]) / old[label]["baseline"]
                if "baseline#aa" in old.get(label, {})
                else None
            )
            entry["shapes"][label] = {
                "new_ms": new[label],
                "old_ms": old.get(label, {}),
                "new_over_old": ratios,
                "aa_rel_diff_new": new_aa[label],
                "aa_rel_diff_old": old_aa,
                "n_new": {
                    n: it.n for s in rec.shapes if s.shape == label for n, it in s.impls.items()
                },
            }
        result["runs"].append(entry)
        save()
        print(
            f"run {run + 1}: new layout {new_wall:.1f} s (timing {rec.timing_phase_s} s), old "
            f"in-process {old_wall:.1f} s; "
            f"gate {gate.category} objective {gate.objective}; problems {rec.problems}"
        )
        for label, sh in entry["shapes"].items():
            print(
                f"  {label:>12}  "
                + "  ".join(
                    f"{n} new {sh['new_ms'][n]:.4f} old {sh['old_ms'].get(n, float('nan')):.4f} "
                    f"({sh['new_over_old'].get(n, float('nan')):.4f})"
                    for n in ("candidate", "baseline")
                )
                + f"  A/A new {sh['aa_rel_diff_new']:.4f}"
            )
        if out and out.idle:
            print(
                f"  idle probe calibration {out.idle.get('calibration')}, worst host ms "
                f"{out.idle.get('worst_host_ms')}"
            )

    # Across runs: each kernel's median of medians per layout, and the largest deviation.
    summary = {}
    for label in result["runs"][0]["shapes"] if result["runs"] else []:
        row = {}
        for impl in ("candidate", "baseline"):
            nv = [
                r["shapes"][label]["new_ms"][impl] for r in result["runs"] if label in r["shapes"]
            ]
            ov = [
                r["shapes"][label]["old_ms"][impl] for r in result["runs"] if label in r["shapes"]
            ]
            row[impl] = {
                "new_ms": statistics.median(nv),
                "old_ms": statistics.median(ov),
                "new_over_old": statistics.median(nv) / statistics.median(ov),
            }
        row["aa_rel_diff_new_max"] = max(
            r["shapes"][label]["aa_rel_diff_new"] or 0.0 for r in result["runs"]
        )
        summary[label] = row
    worst = max(
        (
            abs(v[i]["new_over_old"] - 1)
            for v in summary.values()
            for i in ("candidate", "baseline")
        ),
        default=None,
    )
    result["summary"] = {
        "per_shape": summary,
        "worst_relative_deviation": worst,
        "target": 0.02,
        "within_target": worst is not None and worst <= 0.02,
    }
    save()
    print(
        f"worst |new/old - 1| over shapes and kernels (median of {args.runs} runs): {worst} "
        "(target <= 0.02)"
    )
    for label, row in summary.items():
        print(
            f"  {label:>12}  fused {row['candidate']['new_ms']:.4f} vs "
            f"{row['candidate']['old_ms']:.4f}  "
            f"baseline {row['baseline']['new_ms']:.4f} vs {row['baseline']['old_ms']:.4f}  "
            f"A/A max {row['aa_rel_diff_new_max']:.4f}"
        )


if __name__ == "__main__":
    main()
