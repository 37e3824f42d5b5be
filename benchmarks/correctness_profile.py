"""Where a correctness evaluation's time goes, on both sides (issue 13). A diagnosis script,
not a test: the flagship's honest fused candidate evaluated (no timing) twice in one round
(the second with the round's references reused, as a loop's later candidates are), the
correctness worker under cProfile (trusted/workers.PROFILE_DIR) and the trusted side's
thread under another.

    python benchmarks/correctness_profile.py OUT.txt [--device cuda] [--candidate PATH]

The worker's profile is the candidate's process measuring itself: good for finding the
harness's own overhead, never evidence about the candidate.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.evaluate.trusted.launch import workers  # noqa: E402
from kernelloop.evaluate.trusted.run import evaluate  # noqa: E402
from kernelloop.evaluate.trusted.values.refcache import References  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"


def _top(stats: pstats.Stats, key: str, n: int) -> str:
    buf = io.StringIO()
    stats.stream = buf
    stats.sort_stats(key).print_stats(n)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidate", type=Path, default=TASK / "candidates" / "fused_naive.py")
    args = ap.parse_args()
    task = load_task(TASK)
    refs = References()
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        workers.PROFILE_DIR = Path(tmp)
        for k in range(2):
            trusted = cProfile.Profile()
            t = time.monotonic()
            trusted.enable()
            rec = evaluate(task, args.candidate, device=args.device, timing=False, references=refs)
            trusted.disable()
            wall = time.monotonic() - t
            stages = ", ".join(
                f"{s.name} {s.seconds:.2f} (judge {s.judge_seconds:.2f})" for s in rec.stages
            )
            lines.append(f"== evaluation {k}: {rec.verdict.category} in {wall:.1f} s: {stages}")
            if k == 1:
                lines.append("-- trusted side, cumulative")
                lines.append(_top(pstats.Stats(trusted), "cumulative", 45))
                lines.append("-- trusted side, own time")
                lines.append(_top(pstats.Stats(trusted), "tottime", 30))
        profs = sorted(Path(tmp).glob("correctness-*.prof"))
        lines.append(f"worker profiles: {len(profs)}")
        if profs:
            stats = pstats.Stats(str(profs[-1]))
            lines.append("-- the second evaluation's worker, cumulative")
            lines.append(_top(stats, "cumulative", 50))
            lines.append("-- the second evaluation's worker, own time")
            lines.append(_top(stats, "tottime", 35))
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
