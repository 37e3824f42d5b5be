"""Where the trusted side's time goes when judging one candidate (issue 13). A diagnosis
script, not a test: the flagship's honest fused candidate, `evaluate(timing=False)` and then
the gate's benchmark, each under cProfile (the trusted process's main thread, where every
call is judged), with the record's per-stage seconds.

    python benchmarks/judge_profile.py OUT.txt [--device cuda] [--candidate PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.evaluate.trusted.bench import benchmark  # noqa: E402
from kernelloop.evaluate.trusted.run import evaluate  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"


def stats(prof: cProfile.Profile, key: str, n: int) -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(n)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidate", type=Path, default=TASK / "candidates" / "fused_naive.py")
    ap.add_argument("--no-bench", action="store_true")
    args = ap.parse_args()
    task = load_task(TASK)
    parts = []
    prof = cProfile.Profile()
    t0 = time.monotonic()
    prof.enable()
    rec = evaluate(task, args.candidate, device=args.device, timing=False)
    prof.disable()
    parts.append(f"evaluate: {rec.verdict.category} in {time.monotonic() - t0:.1f} s")
    for s in rec.stages:
        parts.append(
            f"  {s.name}: {s.seconds:.2f} s (judge {s.judge_seconds:.2f} s, {s.calls} calls)"
        )
    calls: dict[str, int] = {}
    for c in rec.checks:
        k = f"{c.suite} {c.shape} {c.dtype}"
        calls[k] = calls.get(k, 0) + 1
    parts.append(
        "checks per suite/shape/dtype: " + "; ".join(f"{k}: {v}" for k, v in sorted(calls.items()))
    )
    parts += [stats(prof, "tottime", 45), stats(prof, "cumulative", 70)]
    if not args.no_bench and rec.verdict.accepted:
        prof = cProfile.Profile()
        t0 = time.monotonic()
        prof.enable()
        b = benchmark(task, args.candidate, device=args.device, dtype=task.spec.dtypes[0])
        prof.disable()
        parts.append(f"benchmark: {time.monotonic() - t0:.1f} s, problems {b.problems}")
        parts += [stats(prof, "tottime", 40), stats(prof, "cumulative", 70)]
    args.out.write_text("\n".join(parts))
    print("\n".join(parts[:3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
