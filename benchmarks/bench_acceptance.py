"""Issue 4's H200 acceptance measurements; writes one JSON file.

1. `benchmark()` (sandboxed worker, the real path): fused_naive vs the baseline as the
   best, all five GPU shapes, bf16 → wall time (target ≤ 20 s) and the gate's verdict.
2. The same path, fused_naive against an identical copy of itself as the best → the
   gate must refuse (no-op trial 0).
3. Spread: fused_naive timed 10 times on 16384x8192 bf16 — 10 independent timing
   blocks with the benchmark's own settings (candidate, a copy as the best, the
   baseline and the A/A slot interleaved; warm-up, rounds and budget as `benchmark()`
   uses them) → (max - min) / median of the candidate's 10 medians (target ≤ 1%), and
   the same for the candidate/best ratio the gate judges.
4. No-op trials 1..20: fused_naive vs an identical copy (separately imported module),
   baseline beside them, A/A slot, all five shapes, judged by the gate → accepted 0 of 20.

    python3 benchmarks/bench_acceptance.py --out acceptance.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from inprocess_timer import (  # the old one-process timer
    record_from_messages,
    time_impls,
    timing_spec,
)

from kernelloop.evaluate.trusted.bench import BenchmarkRecord, benchmark
from kernelloop.gate import performance_gate
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "ln_softmax_dropout"
FUSED = TASK / "candidates" / "fused_naive.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.forward


def _summary(rec: BenchmarkRecord, gate) -> dict:
    return {
        "wall_s": rec.wall_s,
        "timing_phase_s": rec.timing_phase_s,
        "problems": rec.problems,
        "warnings": rec.warnings,
        "method": rec.method,
        "accepted": gate.accepted,
        "objective": gate.objective,
        "required_gain": gate.required_gain,
        "reasons": gate.reasons,
        "gate_warnings": gate.warnings,
        "gpu_state": [g.model_dump() for g in rec.gpu_state],
        "shapes": [
            {
                "shape": s.shape,
                "noise_rel": s.noise_rel,
                "aa_rel_diff": s.aa_rel_diff,
                "observed_s": s.observed_s,
                "reported_s": s.reported_s,
                **{f"{n}_ms": it.median_ms for n, it in s.impls.items()},
                **{
                    f"{n}_profiler_ms": it.profiler_ms
                    for n, it in s.impls.items()
                    if it.profiler_ms
                },
                "candidate_pct_of_floor": s.impls["candidate"].pct_of_floor
                if "candidate" in s.impls
                else None,
            }
            for s in rec.shapes
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=20)
    args = ap.parse_args()
    task = load_task(TASK)
    out: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    tmp = Path(tempfile.mkdtemp())
    copy = tmp / "fused_copy.py"
    shutil.copyfile(FUSED, copy)

    def save() -> None:
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))

    # 1-2: the sandboxed path.
    rec = benchmark(task, FUSED, best=task.baseline_path, dtype="bfloat16")
    out["bench_fused_vs_baseline"] = _summary(rec, performance_gate(rec, task.spec.rules))
    Path(args.out).with_suffix(".record.json").write_text(rec.model_dump_json(indent=2))
    save()
    rec = benchmark(task, FUSED, best=copy, dtype="bfloat16")
    out["bench_noop_sandboxed"] = _summary(rec, performance_gate(rec, task.spec.rules))
    save()

    # 3: spread of the same kernel, 10 timing blocks.
    spec_i = importlib.util.spec_from_file_location("kl_inputs", TASK / "inputs.py")
    inp_mod = importlib.util.module_from_spec(spec_i)
    spec_i.loader.exec_module(inp_mod)
    fused, fused2, base = (
        _load(FUSED, "kl_fused"),
        _load(copy, "kl_fused_copy"),
        _load(task.baseline_path, "kl_base"),
    )
    params = {"p": 0.1, "eps": 1e-5}
    big = task.find_shape("16384x8192")
    meds, ratios = [], []
    for i in range(10):
        spec = timing_spec([big], "bfloat16", ["candidate", "best", "baseline"], "cuda", "best", [])
        spec["order_seed"] = i
        got = {
            m["impl"]: m
            for m in time_impls(
                {"device": "cuda", "params": params, "timing": spec},
                {"candidate": fused, "best": fused2, "baseline": base},
                inp_mod.make_inputs,
            )
        }
        meds.append(got["candidate"]["median_ms"])
        ratios.append(got["candidate"]["median_ms"] / got["best"]["median_ms"])
        out.setdefault("spread_blocks", []).append(
            {
                k: {"median_ms": v["median_ms"], "n": v["n"], "hidden": v["hidden_calls"]}
                for k, v in got.items()
            }
        )
    out["spread_16384x8192"] = {
        "medians_ms": meds,
        "spread": (max(meds) - min(meds)) / statistics.median(meds),
        "ratio_to_copy": ratios,
        "ratio_spread": max(ratios) - min(ratios),
        "target": 0.01,
    }
    save()

    # 4: no-op trials, judged by the gate on records built from in-process timings.
    shapes = list(task.spec.shapes)
    trials = []
    for i in range(args.trials):
        spec = timing_spec(
            shapes, "bfloat16", ["candidate", "best", "baseline"], "cuda", "best", [], max_s=0.3
        )
        spec.update(input_seed=7 + i, order_seed=100 + i)
        job = {"device": "cuda", "params": params, "timing": spec}
        t0 = time.monotonic()
        msgs = list(
            time_impls(
                job, {"candidate": fused, "best": fused2, "baseline": base}, inp_mod.make_inputs
            )
        )
        rec = BenchmarkRecord(
            task=task.name,
            task_digest="-",
            language="triton",
            candidate=str(FUSED),
            candidate_sha256="-",
            impl_sha256={},
            best="best",
            started_at="-",
            wall_s=0.0,
            device="cuda",
            device_name=torch.cuda.get_device_name(0),
            torch=torch.__version__,
            python="-",
            sandbox="in-process",
            interpreter=False,
            aa_impl="best",
            timings_count=True,
        )
        record_from_messages(rec, task, shapes, "bfloat16", msgs)
        g = performance_gate(rec, task.spec.rules)
        trials.append(
            {
                "accepted": g.accepted,
                "objective": g.objective,
                "required_gain": g.required_gain,
                "problems": rec.problems,
                "s": round(time.monotonic() - t0, 2),
                "hidden_calls": sum(
                    it.hidden_calls for sb in rec.shapes for it in sb.impls.values()
                ),
                "calls": sum(it.n for sb in rec.shapes for it in sb.impls.values()),
            }
        )
    out["noop_trials"] = {
        "n": len(trials),
        "accepted": sum(t["accepted"] for t in trials),
        "trials": trials,
    }
    save()
    shutil.rmtree(tmp, ignore_errors=True)
    a, b = out["bench_fused_vs_baseline"], out["bench_noop_sandboxed"]
    print(
        f"bench fused vs baseline: wall {a['wall_s']:.1f} s (timing {a['timing_phase_s']} s), "
        f"accepted={a['accepted']}, objective {a['objective']}"
    )
    print(
        f"bench no-op (sandboxed): wall {b['wall_s']:.1f} s, accepted={b['accepted']}, objective "
        f"{b['objective']}"
    )
    sp = out["spread_16384x8192"]
    print(
        f"spread 16384x8192 x10: {sp['spread']:.3%} (target <= 1%); candidate/copy ratio spread "
        f"{sp['ratio_spread']:.3%}"
    )
    hid = sum(t["hidden_calls"] for t in trials), sum(t["calls"] for t in trials)
    print(
        f"no-op trials accepted: {out['noop_trials']['accepted']} of {out['noop_trials']['n']} "
        f"(target 0); honest calls flagged as hidden work: {hid[0]} of {hid[1]}"
    )


if __name__ == "__main__":
    main()
