"""How much of an under-reported time the run-through check sees, shape by shape (issue 12;
red-team f[0.8] was neither rejected nor raised at 16384x8192 on the H200, 2026-12-02).
A benchmark, not a test.

The flagship's fused kernel as the best, and as the candidate the same kernel reporting
`scale` of its real event times (tests/redteam/candidates/timing_gpu_lying_timer.py);
`--scales 1.0` is the honest control. Each benchmark (bf16, no A/A slot, the red-team
test's shapes) records what `through_checks.through_check` saw per shape: every slot's
claim and its run-through batches (round, the trusted clock's inputs' and units' windows,
units, quiet, and the worker's own phase times), the ms added and the verdict; then the
per-shape medians and the record's warnings and problems.

    python benchmarks/through_power.py OUT.json [--scales 0.8,1.0] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.redteam.harness import candidate_source  # noqa: E402

from kernelloop.evaluate.trusted.bench import benchmark  # noqa: E402
from kernelloop.evaluate.trusted.clock import through_checks  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"
FUSED = TASK / "candidates" / "fused_naive.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--scales", default="0.8,1.0")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shapes", default="4096x8000,16384x8192")
    args = ap.parse_args()
    task = load_task(TASK)
    seen: list[dict] = []
    real = through_checks.through_check

    def logged(label, accs, claimed, candidate):
        added, why = real(label, accs, claimed, candidate)
        row = {
            "shape": label,
            "claimed_ms": {s: round(v, 5) for s, v in claimed.items()},
            "through_rows": {
                s: [
                    (
                        r.round,
                        round(r.make_ms, 3),
                        round(r.run_ms, 3),
                        r.units,
                        r.quiet,
                        [round(x, 3) for x in r.phases_ms],
                    )
                    for r in a.through
                ]
                for s, a in accs.items()
            },
            "added_ms": added,
            "rejected": why,
        }
        seen.append(row)
        return added, why

    through_checks.through_check = logged  # interleave_checks calls it through the module
    tmp = Path(tempfile.mkdtemp())
    best = tmp / "fused_best.py"
    shutil.copyfile(FUSED, best)
    src = candidate_source("timing_gpu_lying_timer.py")
    out: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": []}
    for scale in [float(s) for s in args.scales.split(",")]:
        cheat = tmp / f"lying_{scale}.py"
        cheat.write_text(src.replace("(t / 100, s / 100)", f"(t * {scale}, s * {scale})"))
        for k in range(args.repeats):
            seen.clear()
            t0 = time.monotonic()
            rec = benchmark(
                task,
                cheat,
                best=best,
                aa=False,
                device="cuda",
                shapes=args.shapes,
                dtype="bfloat16",
                screen=False,
            )
            run = {
                "scale": scale,
                "repeat": k,
                "wall_s": round(time.monotonic() - t0, 1),
                "medians_ms": {
                    sb.shape: {s: round(it.median_ms, 5) for s, it in sb.impls.items()}
                    for sb in rec.shapes
                },
                "method": rec.method,
                "warnings": rec.warnings,
                "problems": rec.problems,
                "through": list(seen),
            }
            out["runs"].append(run)
            print(json.dumps({k: v for k, v in run.items() if k != "through"}), flush=True)
            for row in seen:
                print(
                    "  ",
                    row["shape"],
                    "claimed",
                    row["claimed_ms"],
                    "added",
                    round(row["added_ms"], 4),
                    "rejected" if row["rejected"] else "",
                    flush=True,
                )
            args.out.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
