"""Repeat the side-stream cheat behind the static screen (class 11, GPU) and record what
the timer measured each time, next to the honest kernel it hides: the cheat must never
look faster than the same kernel run honestly. Usage:
    python3 benchmarks/side_stream_check.py N OUT.json"""

import json
import sys
import time
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "ln_softmax_dropout"
CHEAT = ROOT / "tests" / "cheats" / "candidates" / "side_stream_gpu.py"
FUSED = TASK / "candidates" / "fused_naive.py"


def main() -> None:
    n, out = int(sys.argv[1]), Path(sys.argv[2])
    task = load_task(TASK)
    runs = []
    for i in range(n):
        t0 = time.monotonic()
        rec = evaluate(
            task,
            CHEAT,
            device="cuda",
            shapes="4096x8000",
            dtypes=["bfloat16"],
            against={"fused": FUSED},
            screen=False,
        )
        med = {t.impl: t.median_ms for t in rec.timings}
        runs.append(
            {
                "run": i,
                "wall_s": round(time.monotonic() - t0, 1),
                "verdict": rec.verdict.category,
                "reasons": rec.verdict.reasons[:3],
                "median_ms": med,
                "ratio_candidate_over_fused": round(med["candidate"] / med["fused"], 4),
                "method": sorted({t.method for t in rec.timings}),
            }
        )
        print(json.dumps(runs[-1]), flush=True)
    ok = all(r["ratio_candidate_over_fused"] >= 0.8 for r in runs)
    out.write_text(
        json.dumps(
            {"runs": runs, "environment": rec.environment.model_dump(), "all_at_least_0.8": ok},
            indent=1,
        )
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
