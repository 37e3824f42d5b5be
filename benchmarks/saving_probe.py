"""How much a lying GPU worker can hide under the saving check's slack (issue 12). A benchmark
script, not a test: it prints what the trusted clock saw, it asserts nothing.

The red team's lying worker (tests/redteam/candidates/timing_gpu_lying_timer.py: the honest
fused kernel, its timing loop swapped to scale every reported interval) is written with
scale factors from 1.0 (honest numbers through the swapped loop) down to 0.01, and timed
against the fused best like the GPU red-team tests do, several times each, next to plain
honest copies of the best. Every call of `timing_checks.saving_check` is logged: per shape
the candidate's unaccounted ms per call (`got`), the others' (`ref`), the slack, what the
candidate claims per call, and the verdict (passed / corrected by X ms / rejected).

    python benchmarks/saving_probe.py OUT.json [--device cuda] [--shapes 4096x8000,...]
        [--scales 1,0.9,0.7,0.5,0.01] [--repeats 2] [--honest 3] [--extra FILE ...]
        [--task DIR --honest-file FILE [--no-best]]

Another task: `--task examples/matmul_bias_gelu --honest-file examples/matmul_bias_gelu/
candidates/fast.py --no-best --scales ""` times honest copies of the tiled GEMM against the
baseline alone (the lying worker is the flagship's kernel: no --scales there).

`--extra` adds honest candidates of another kind (e.g. benchmarks/candidates/
fused_randint4x.py, faster than the best on long rows), `--repeats` times each: the check
must pass them.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from kernelloop.evaluate.trusted.bench import benchmark  # noqa: E402
from kernelloop.evaluate.trusted.clock import through_checks, timing_checks  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"
FUSED = TASK / "candidates" / "fused_naive.py"
LIAR = ROOT / "tests" / "redteam" / "candidates" / "timing_gpu_lying_timer.py"
LOG: list[dict] = []


def _logged(orig):
    def check(label, accs, candidate, device):
        added, bad = orig(label, accs, candidate, device)
        cand = accs.get(candidate)
        others = {s: a for s, a in accs.items() if s != candidate and a.calls and a.batches}
        row = {
            "check": "saving",
            "shape": label,
            "device": device,
            "added_ms": added,
            "rejected": bad is not None,
        }
        if cand is not None and cand.calls and cand.batches and others:
            row |= {
                "got_ms": cand.unaccounted_ms_per_call(),
                "others_ms": {s: a.unaccounted_ms_per_call() for s, a in others.items()},
                "claimed_ms": cand.reported_ms() / len(cand.calls),
                "others_claimed_ms": {s: a.reported_ms() / len(a.calls) for s, a in others.items()},
                "batches": len(cand.batches),
                "calls_per_batch": len(cand.calls) / max(len(cand.batches), 1),
            }
        if bad:
            row["reason"] = bad
            m = re.search(r"\(slack ([0-9.]+) ms\)", bad)
            row["slack_ms"] = float(m.group(1)) if m else None
        LOG.append(row)
        return added, bad

    return check


def _logged_through(orig):
    def check(label, accs, claimed, candidate):
        added, bad = orig(label, accs, claimed, candidate)
        LOG.append(
            {
                "check": "through",
                "shape": label,
                "added_ms": added,
                "rejected": bad is not None,
                "reason": bad,
                "claimed_ms": claimed,
                "through_rows": {
                    s: [dataclasses.astuple(r) for r in a.through] for s, a in accs.items()
                },
            }
        )
        return added, bad

    return check


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", default="4096x8000,16384x8192")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--scales", default="1,0.9,0.7,0.5,0.01")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--honest", type=int, default=3)
    ap.add_argument("--extra", action="append", default=[], type=Path)
    ap.add_argument("--task", type=Path, default=TASK, help="task folder (default: flagship)")
    ap.add_argument(
        "--honest-file",
        type=Path,
        default=FUSED,
        help="the honest candidate copied for --honest runs (and the best, unless --no-best)",
    )
    ap.add_argument("--no-best", action="store_true", help="no best: the baseline alone")
    a = ap.parse_args()
    timing_checks.saving_check = _logged(timing_checks.saving_check)
    through_checks.through_check = _logged_through(through_checks.through_check)
    task = load_task(a.task)
    tmp = Path(tempfile.mkdtemp(prefix="saving_probe_"))
    best = None if a.no_best else tmp / "best.py"
    if best is not None:
        shutil.copyfile(a.honest_file, best)
    runs: list[tuple[str, float | Path | None]] = [("honest", None)] * a.honest
    runs += [(f"extra={x.stem}", x) for x in a.extra for _ in range(a.repeats)]
    runs += [(f"scale={s}", float(s)) for s in a.scales.split(",") if s for _ in range(a.repeats)]
    results = []
    for i, (name, scale) in enumerate(runs):
        cand = tmp / f"cand_{i}.py"
        if scale is None:
            shutil.copyfile(a.honest_file, cand)
        elif isinstance(scale, Path):
            shutil.copyfile(scale, cand)
        else:
            src = LIAR.read_text().replace("(t / 100, s / 100)", f"(t * {scale}, s * {scale})")
            assert f"t * {scale}" in src, "the lying timer's report line changed"
            cand.write_text(src)
        start = len(LOG)
        rec = benchmark(
            task,
            cand,
            best=best,
            device=a.device,
            shapes=a.shapes,
            dtype=a.dtype,
            aa=False,
            screen=False,
        )
        med = {
            s.shape: {slot: round(i.median_ms, 5) for slot, i in s.impls.items()}
            for s in rec.shapes
        }
        results.append(
            {
                "run": name,
                "scale": scale if not isinstance(scale, Path) else None,
                "problems": rec.problems,
                "medians_ms": med,
                "checks": LOG[start:],
            }
        )
        print(name, med, rec.problems[:1], LOG[start:], flush=True)
        _write(Path(a.out), a, results)


def _write(out: Path, a: argparse.Namespace, results: list[dict]) -> None:
    """Rewritten after every run, so a call cut at its time limit keeps what it measured."""
    out.write_text(
        json.dumps(
            {
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "device": a.device,
                "task": str(a.task),
                "shapes": a.shapes,
                "dtype": a.dtype,
                "runs": results,
            },
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
