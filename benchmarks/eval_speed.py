"""How long judging a candidate takes, stage by stage (issue 13). A benchmark, not a test.

Three candidates of the flagship, each judged `--repeats` times (median reported):
- `fused`: the honest fused kernel (examples/ln_softmax_dropout/candidates/fused_naive.py);
- `baseline`: the task's own three-kernel baseline;
- `wrong`: the one-pass variance kernel (tests/cheats/candidates/one_pass_variance.py),
  right on random data and wrong on the `large_offset` extreme case.
Each evaluation is what the loop runs (`loop/evaluation.py`): `evaluate(timing=False)`,
then, for a candidate that passed and where timings count (a GPU), the gate's benchmark
against the baseline, whose workers were started while correctness ran (`--no-overlap`:
started after it). `total` runs from the start to the verdict with every worker ended (a
rejected candidate's benchmark workers killed unused). Each repeat is one round: its
candidates share the round's seeds and reference cache (`refcache.References`) as the
loop's candidates do (`--fresh`: each evaluation its own); `--workers N` sets the
correctness workers (default: evaluate's, `launch/worker_count.default_workers`: 2 on a
2-core CPU, up to 4 on a GPU); `--prestart S` starts each evaluation's correctness workers
S seconds before it (uncounted), as the loop does during the previous evaluation. Per
stage (static, start, compile, smoke, full, timing) and in all, seconds of wall-clock
time, with the verdict; a rejected candidate is never benchmarked. On the CPU the Triton
interpreter runs the kernels and timings never count, so nothing is timed or benchmarked
there (the record says `skipped`).

    python benchmarks/eval_speed.py OUT_DIR [--device auto|cuda|cpu] [--repeats 3]
        [--shapes gpu|cpu|LABELS] [--dtypes bfloat16,float16,float32] [--only fused,wrong]
        [--workers N] [--fresh] [--no-overlap] [--prestart S]

Writes OUT_DIR/eval-speed-<device>-<UTC time>.json and .md (device, versions, commit,
load average, every run and the medians).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.evaluate.trusted.bench import start_benchmark  # noqa: E402
from kernelloop.evaluate.trusted.channel.inbox import Inbox  # noqa: E402
from kernelloop.evaluate.trusted.channel.outputs import OutputDir  # noqa: E402
from kernelloop.evaluate.trusted.launch import prestart  # noqa: E402
from kernelloop.evaluate.trusted.run import (  # noqa: E402
    default_workers,
    evaluate,
    resolve_device,
)
from kernelloop.evaluate.trusted.values.refcache import References  # noqa: E402
from kernelloop.gate import decide  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"
CANDIDATES = {
    "fused": TASK / "candidates" / "fused_naive.py",
    "baseline": TASK / "baseline.py",
    "wrong": ROOT / "tests" / "cheats" / "candidates" / "one_pass_variance.py",
}
EXPECTED = {"fused": "accepted", "baseline": "accepted", "wrong": "wrong"}
STAGES = ("static", "start", "compile", "smoke", "full", "e2e", "timing")


# How each evaluation's outputs reached the judge: through shared slots or files
# (trusted/channel/inbox.py; files where slots could not be made or an output is too large).
TRANSPORT = {"slots": 0, "files": 0}


def _count_transport() -> None:
    take, open_file = Inbox.take, OutputDir._open

    def counted_take(self, slot, nbytes):
        TRANSPORT["slots"] += 1
        return take(self, slot, nbytes)

    def counted_open(self, name, nbytes):
        TRANSPORT["files"] += 1
        return open_file(self, name, nbytes)

    Inbox.take, OutputDir._open = counted_take, counted_open


def one(task, name: str, path: Path, args, references: References | None) -> dict:
    TRANSPORT.update(slots=0, files=0)
    t0 = time.monotonic()
    before = references.stats() if references is not None else None
    dtype = (args.dtypes or task.spec.dtypes)[0]
    # Where timings count, the benchmark's workers start while correctness runs, as the
    # loop's do (loop/evaluation.py; --no-overlap: after it).
    timed = args.device == "cuda"
    pending = (
        start_benchmark(
            task,
            path,
            device=args.device,
            shapes=args.shapes,
            dtype=dtype,
            sandbox=args.sandbox,
            head_start_s=600.0,
        )
        if timed
        else None
    )
    rec = evaluate(
        task,
        path,
        device=args.device,
        shapes=args.shapes,
        dtypes=args.dtypes,
        timing=False,
        sandbox=args.sandbox,
        references=references,
        workers=args.workers,
        on_passed={"smoke": pending.spawn} if pending and not args.no_overlap else None,
        prestarted=args.prestart is not None,
    )
    row = {
        "candidate": name,
        "outputs_via": dict(TRANSPORT),
        "verdict": rec.verdict.category,
        "first_reason": (rec.verdict.reasons or [""])[0][:200],
        "checks": len(rec.checks),
        "evaluate_s": round(time.monotonic() - t0, 3),
        "stages": {
            s.name: {
                "s": s.seconds,
                "judge_s": s.judge_seconds,
                "calls": s.calls,
                "status": s.status,
            }
            for s in rec.stages
        },
        "bench_s": None,
        "bench_phases_s": None,
        "gate": None,
        "gate_reasons": [],
        "speedup_vs_baseline": None,
        "references": _delta(before, references.stats()) if references is not None else None,
    }
    if rec.verdict.accepted and pending is not None:  # where timings count, as the loop does
        t1 = time.monotonic()
        b = pending.run()
        row["bench_s"] = round(time.monotonic() - t1, 3)
        row["bench_phases_s"] = dict(b.phases_s)
        g = decide(rec, b, task.spec.rules)
        row["gate"], row["gate_reasons"] = g.category, [r[:300] for r in g.reasons]
        row["speedup_vs_baseline"] = {s.shape: round(s.speedup_vs_baseline, 4) for s in g.shapes}
        row["stages"]["timing"] = {
            "s": row["bench_s"],
            "judge_s": 0.0,
            "calls": 0,
            "status": "passed",
        }
    if pending is not None:
        pending.cancel()  # a rejected candidate's benchmark workers (a no-op once it ran)
    # From the start to the verdict with every worker ended, as the loop's job returns.
    row["total_s"] = round(time.monotonic() - t0, 3)
    return row


def _delta(before: dict, after: dict) -> dict:
    """What one evaluation did to the round's reference cache."""
    return {
        "hits": after["hits"] - before["hits"],
        "computed": after["misses"] - before["misses"],
        "kept_mib": round(after["bytes"] / 2**20, 1),
    }


def median_of(rows: list[dict]) -> dict:
    def med(values):
        vals = [v for v in values if v is not None]
        return round(statistics.median(vals), 3) if vals else None

    out = {
        "verdicts": sorted({r["verdict"] for r in rows}),
        "evaluate_s": med(r["evaluate_s"] for r in rows),
        "bench_s": med(r["bench_s"] for r in rows),
        "total_s": med(r["total_s"] for r in rows),
        "stages": {},
    }
    phases = [r["bench_phases_s"] for r in rows if r.get("bench_phases_s")]
    out["bench_phases_s"] = {
        k: med(p.get(k, 0.0) for p in phases) for k in (phases[0] if phases else {})
    }
    out["judge_s"] = {}
    for st in STAGES:
        ran = [r["stages"][st] for r in rows if r["stages"].get(st, {}).get("status") != "not run"]
        out["stages"][st] = med(s["s"] for s in ran) if ran else None
        out["judge_s"][st] = med(s["judge_s"] for s in ran) if ran else None
    return out


def environment(device: str) -> dict:
    import torch

    env = {
        "device": device,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    try:
        env["commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        env["commit"] = None
    env["src_sha256"] = src_digest()
    return env


def src_digest() -> str:
    """sha256 over the imported kernelloop package's .py files (relative path and bytes,
    sorted): names the code that ran where git cannot — the device copy's git metadata is
    the session's first tree (2026-12-05), so `commit` there is stale. Compare with
    `python3 -c "import sys; sys.path[:0] = ['benchmarks', 'src']; import eval_speed;
    print(eval_speed.src_digest())"` in a checkout of the commit you believe ran."""
    import hashlib

    import kernelloop

    root = Path(kernelloop.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def markdown(result: dict) -> str:
    env, med = result["environment"], result["median"]
    lines = [
        f"# Judging speed ({env['device']}, {result['when']})",
        "",
        f"{env.get('gpu') or env['machine']} · torch {env['torch']} · triton {env['triton']} · "
        f"commit {str(env['commit'])[:10]} (src {str(env.get('src_sha256'))[:12]}) · "
        f"load before {env['loadavg_before'][0]:.2f} · "
        f"median of {result['repeats']} · shapes {result['shapes'] or 'default'} · "
        f"dtypes {result['dtypes'] or 'all'} · {result['workers']} correctness worker(s) · "
        + (
            "fresh seeds per evaluation"
            if result["fresh"]
            else "one round (shared seeds and "
            "references) per repeat, candidates in the order listed"
        )
        + (
            " · benchmark workers started during correctness"
            if result.get("overlap") and env["device"] == "cuda"
            else ""
        ),
        "",
        "| candidate | verdict | " + " | ".join(STAGES) + " | evaluate s | bench s | total s |",
        "|---" * (len(STAGES) + 5) + "|",
    ]
    for name, m in med.items():
        cells = [("-" if m["stages"][s] is None else f"{m['stages'][s]:.1f}") for s in STAGES]
        bench = "-" if m["bench_s"] is None else f"{m['bench_s']:.1f}"
        lines.append(
            f"| {name} | {', '.join(m['verdicts'])} | "
            + " | ".join(cells)
            + f" | {m['evaluate_s']:.1f} | {bench} | {m['total_s']:.1f} |"
        )
    lines += [
        "",
        "Of each stage, the trusted side's own judging (reading outputs, regenerating inputs, "
        "the float64 reference, the comparison), median seconds: "
        + "; ".join(
            f"{n}: " + ", ".join(f"{s} {v:.1f}" for s, v in m["judge_s"].items() if v)
            for n, m in med.items()
        )
        + ".",
        "",
        "The benchmark's wall time by part, median seconds over shapes (audit, audit_fetch "
        "and through are parts of rounds; audits and turns are counts): "
        + "; ".join(
            f"{n}: "
            + ", ".join(
                f"{k} {v:.0f}" if k in ("audits", "turns") else f"{k} {v:.2f}"
                for k, v in m["bench_phases_s"].items()
            )
            for n, m in med.items()
            if m.get("bench_phases_s")
        )
        + ".",
        "",
        "Stages are wall-clock seconds on the trusted side; `timing` is the gate's benchmark "
        "against the baseline (GPU only: under the CPU interpreter timings never count, so "
        "nothing is timed). A rejected candidate stops at its first failed check and is "
        "never benchmarked.",
    ]
    gated = [r for r in result["runs"] if r.get("gate")]
    if gated:
        lines += ["", _gates(gated)]
    return "\n".join(lines) + "\n"


def _gates(runs: list[dict]) -> str:
    """Each benchmarked repeat's gate verdict, its reasons and per-shape speedups."""
    parts = []
    for r in runs:
        text = f"{r['candidate']} #{r['repeat']}: {r['gate']}"
        if r.get("gate_reasons"):
            text += f" ({' / '.join(r['gate_reasons'])})"
        if r.get("speedup_vs_baseline"):
            text += " · speedup " + ", ".join(
                f"{k} {v:.3f}x" for k, v in r["speedup_vs_baseline"].items()
            )
        parts.append(text)
    return (
        "The gate on the benchmark (the candidate against the baseline, in the task's first "
        "dtype), every repeat: " + "; ".join(parts) + "."
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="directory for the JSON and Markdown results")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--dtypes", default=None, help="comma-separated (default: all)")
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--only", default=",".join(CANDIDATES))
    ap.add_argument("--workers", type=int, default=None, help="correctness workers")
    ap.add_argument("--fresh", action="store_true", help="no round: fresh seeds each time")
    ap.add_argument(
        "--no-overlap",
        action="store_true",
        help="start the benchmark's workers after correctness, not during it",
    )
    ap.add_argument(
        "--prestart",
        type=float,
        default=None,
        metavar="S",
        help="start each evaluation's correctness workers S seconds before it (the loop "
        "starts them during the previous one: trusted/launch/prestart.py); not counted",
    )
    args = ap.parse_args()
    args.device = resolve_device(args.device)
    _count_transport()
    args.dtypes = [d.strip() for d in args.dtypes.split(",")] if args.dtypes else None
    task = load_task(TASK)
    names = [n.strip() for n in args.only.split(",")]
    result = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": environment(args.device),
        "repeats": args.repeats,
        "shapes": args.shapes,
        "dtypes": args.dtypes,
        "workers": args.workers or default_workers(args.device, task),
        "fresh": args.fresh,
        "overlap": not args.no_overlap,
        "prestart_s": args.prestart,
        "runs": [],
        "median": {},
    }
    for k in range(args.repeats):  # interleaved: a drift in load hits every candidate alike
        references = None if args.fresh else References()  # one round per repeat
        for name in names:
            if args.prestart is not None:
                prestart.warm(
                    task,
                    args.device,
                    sandbox=args.sandbox,
                    gpu=None,
                    workers=args.workers or default_workers(args.device, task),
                    timeout_s=task.spec.rules.eval_timeout_s,
                    head_s=600.0,
                )
                time.sleep(args.prestart)
            row = one(task, name, CANDIDATES[name], args, references)
            row["repeat"] = k
            result["runs"].append(row)
            parts = ", ".join(f"{s} {v['s']:.1f}" for s, v in row["stages"].items())
            refs = row["references"]
            cache = (
                f"; references {refs['computed']} computed, {refs['hits']} reused" if refs else ""
            )
            via = row["outputs_via"]
            print(
                f"{name} #{k}: {row['verdict']} in {row['total_s']:.1f} s ({parts}{cache}; "
                f"outputs via {via['slots']} slots, {via['files']} files)",
                flush=True,
            )
            if row["verdict"] != EXPECTED[name]:
                print(f"  UNEXPECTED verdict for {name}: {row['first_reason']}", flush=True)
    for name in names:
        result["median"][name] = median_of([r for r in result["runs"] if r["candidate"] == name])
    result["environment"]["loadavg_after"] = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"eval-speed-{args.device}-{result['when'][:19].replace(':', '')}Z"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {args.out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
