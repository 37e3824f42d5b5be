"""Where a timing worker's time goes in the gate's benchmark (issue 13). A diagnosis script,
not a test: the flagship's honest fused candidate timed against the baseline (as the gate
does), every timing worker under cProfile (trusted/workers.PROFILE_DIR), and the trusted
side's view of every command: how long it waited for each kind of answer, per slot.

    python benchmarks/worker_profile.py OUT.txt [--device cuda] [--candidate PATH]

The worker's profile is the candidate's process measuring itself: good for finding the
harness's own overhead, never evidence about the candidate.
"""

from __future__ import annotations

import argparse
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.evaluate.trusted.bench import benchmark  # noqa: E402
from kernelloop.evaluate.trusted.launch import workers  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidate", type=Path, default=TASK / "candidates" / "fused_naive.py")
    ap.add_argument("--shapes", nargs="*", default=None)
    args = ap.parse_args()
    task = load_task(TASK)
    prof_dir = Path(tempfile.mkdtemp(prefix="kl-worker-prof-"))
    workers.PROFILE_DIR = prof_dir
    waits: dict[tuple[str, str], list[float]] = defaultdict(list)
    collect = workers.TimingWorker.collect

    def timed_collect(self, cmd, sent, timeout_s):
        ans = collect(self, cmd, sent, timeout_s)
        waits[(self.slot, cmd)].append(ans.wall_s)
        return ans

    workers.TimingWorker.collect = timed_collect
    t0 = time.monotonic()
    b = benchmark(
        task, args.candidate, device=args.device, shapes=args.shapes, dtype=task.spec.dtypes[0]
    )
    total = time.monotonic() - t0
    parts = [f"benchmark: {total:.1f} s, problems {b.problems}", "", "answers waited for:"]
    for (slot, cmd), w in sorted(waits.items()):
        parts.append(
            f"  {slot:<24} {cmd:<10} n={len(w):<4} sum={sum(w):7.2f} s "
            f"median={statistics.median(w) * 1e3:8.1f} ms max={max(w) * 1e3:8.1f} ms"
        )
    parts.append(f"  all answers: {sum(sum(w) for w in waits.values()):.1f} s of {total:.1f} s")
    for f in sorted(prof_dir.glob("*.prof")):
        for key, n in (("tottime", 30), ("cumulative", 45)):
            buf = io.StringIO()
            pstats.Stats(str(f), stream=buf).strip_dirs().sort_stats(key).print_stats(n)
            parts += ["", f"===== {f.name} by {key}", buf.getvalue()]
    args.out.write_text("\n".join(parts))
    print("\n".join(parts[: 4 + len(waits)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
