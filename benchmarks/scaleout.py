"""Scale-out on one host (issue #17). A benchmark, not a test.

Parts (`--parts`, default all three):
- `local`: the same 8 honest candidates of the flagship (the fused kernel, each with its
  own bytes, so each compiles as a new candidate would) judged as the loop judges them
  (`loop/evaluation.EvaluationJob`: correctness, then the benchmark against the baseline
  on the same GPU) through the local executor on GPU 0 alone, then on GPUs 0 and 1.
  Wall time of each, their ratio (issue #17 asks ≤ 0.55), and every verdict.
- `aa`: the A/A spread (|median(A) − median(A')| / median(A), per shape) of the fused
  kernel benchmarked on GPU 0, first with GPU 1 idle, then while a process keeps GPU 1
  fully busy with matrix products (issue #17 asks ≤ 1%).
- `ray`: the 8 candidates through `--executor ray` on a local Ray head with one
  `num_gpus=1` actor per GPU; verdicts compared with the local executor's. Skipped, with
  the reason in the JSON, where Ray is not installed.

    python benchmarks/scaleout.py OUT_DIR [--parts local,aa,ray] [--shapes 16384x8192]
        [--dtype bfloat16] [--candidates 8]

Writes (or adds its parts to) OUT_DIR/scaleout.json: device, versions, commit, per part
the numbers and verdicts. Each part fits one 10-minute device call on the H200.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.evaluate.trusted.bench import benchmark  # noqa: E402
from kernelloop.executor.local import LocalGPUs  # noqa: E402
from kernelloop.loop.evaluation import EvaluationJob  # noqa: E402
from kernelloop.sandbox import mounts  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

TASK = ROOT / "examples" / "ln_softmax_dropout"
FUSED = TASK / "candidates" / "fused_naive.py"

# Keeps one GPU fully busy: back-to-back bf16 matrix products until killed.
HOG = """
import sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
print("busy", flush=True)
while True:
    for _ in range(50):
        c = a @ b
    torch.cuda.synchronize()
"""


def candidates(folder: Path, tag: str, n: int) -> list[Path]:
    """n copies of the fused kernel, each with bytes of its own (a trailing comment)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        path = folder / f"{tag}_{k}.py"
        path.write_text(FUSED.read_text() + f"\n# scale-out candidate {tag} {k}\n")
        out.append(path)
    return out


def jobs(task, paths: list[Path], shapes: str, dtype: str) -> list[EvaluationJob]:
    return [
        EvaluationJob(
            name=p.stem,
            task=task,
            path=p,
            best=None,  # timed against the baseline (and its A/A copy) on the job's GPU
            device="cuda",
            measured=True,
            shapes=shapes,
            dtypes=(dtype,),
        )
        for p in paths
    ]


def judge_all(executor, job_list: list[EvaluationJob]) -> tuple[float, list[dict]]:
    """Submit every job at once; (wall seconds until all are in, one row per job)."""
    t0 = time.monotonic()
    futures = [executor.submit(j) for j in job_list]
    rows = []
    for j, f in zip(job_list, futures, strict=True):
        ev = f.result()
        gate = ev.gate
        rows.append(
            {
                "candidate": j.name,
                "slot": ev.slot,
                "correct": bool(ev.record and ev.record.verdict.accepted),
                "category": (gate.category if gate else ev.record.verdict.category)
                if ev.record
                else "infrastructure",
                "speedup_vs_baseline": gate.objective if gate else None,
                "infrastructure": ev.infrastructure,
            }
        )
    return round(time.monotonic() - t0, 2), rows


def part_local(args, task, work: Path) -> dict:
    warm = jobs(task, candidates(work / "warm", "warm", 1), args.shapes, args.dtype)
    one_gpu = LocalGPUs([0])
    judge_all(one_gpu, warm)  # the baseline's compile cache and the process warm
    one_s, one_rows = judge_all(
        one_gpu, jobs(task, candidates(work / "g1", "g1", args.candidates), args.shapes, args.dtype)
    )
    one_gpu.close()
    two_gpu = LocalGPUs([0, 1])
    two_s, two_rows = judge_all(
        two_gpu, jobs(task, candidates(work / "g2", "g2", args.candidates), args.shapes, args.dtype)
    )
    two_gpu.close()
    return {
        "candidates": args.candidates,
        "one_gpu_s": one_s,
        "two_gpus_s": two_s,
        "ratio": round(two_s / one_s, 3),
        "throughput_gain": round(one_s / two_s, 3),
        "target_ratio": 0.55,
        "one_gpu": one_rows,
        "two_gpus": two_rows,
        "same_verdicts": [r["category"] for r in one_rows] == [r["category"] for r in two_rows],
        "slots_used_two_gpus": sorted({r["slot"] for r in two_rows}),
    }


def aa_spread(task, shapes: str, dtype: str, gpu: int) -> dict:
    rec = benchmark(task, FUSED, device="cuda", shapes=shapes, dtype=dtype, gpu=gpu)
    return {
        "per_shape": {s.shape: s.aa_rel_diff for s in rec.shapes},
        "max": max((s.aa_rel_diff or 0.0) for s in rec.shapes) if rec.shapes else None,
        "problems": rec.problems,
        "gpu_state": [g.model_dump() for g in rec.gpu_state],
    }


def start_hog(gpu: int) -> subprocess.Popen:
    """A process keeping GPU `gpu` busy; returns once its first products ran."""
    _node, visible = mounts.gpu_device(gpu)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    hog = subprocess.Popen([sys.executable, "-c", HOG], env=env, stdout=subprocess.PIPE, text=True)
    line = hog.stdout.readline().strip()
    if line != "busy":
        hog.kill()
        raise RuntimeError(f"the GPU {gpu} load did not start ({line!r})")
    return hog


def gpu_utilization(gpu: int) -> str:
    return subprocess.run(
        ["nvidia-smi", "-i", str(gpu), "--query-gpu=utilization.gpu", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()


def part_aa(args, task, _work: Path) -> dict:
    idle = aa_spread(task, args.aa_shapes, args.dtype, 0)
    hog = start_hog(1)
    try:
        util = gpu_utilization(1)
        busy = aa_spread(task, args.aa_shapes, args.dtype, 0)
        util_after = gpu_utilization(1)
    finally:
        hog.kill()
        hog.wait()
    return {
        "gpu1_idle": idle,
        "gpu1_busy": busy,
        "gpu1_utilization_during": [util, util_after],
        "target_max": 0.01,
    }


def part_ray(args, task, work: Path) -> dict:
    try:
        import ray  # noqa: F401
    except ImportError:
        return {"skipped": "ray is not installed (pip install 'kernelloop[cluster]')"}
    from kernelloop.executor.cluster import RayActors

    local = LocalGPUs([0, 1])
    paths = candidates(work / "ray", "ray", args.candidates)
    local_s, local_rows = judge_all(local, jobs(task, paths, args.shapes, args.dtype))
    local.close()
    actors = RayActors("cuda")  # a local head; one num_gpus=1 actor per GPU
    try:
        where = actors.where
        ray_s, ray_rows = judge_all(actors, jobs(task, paths, args.shapes, args.dtype))
    finally:
        actors.close()
    return {
        "actors": [list(w) for w in where],
        "local_s": local_s,
        "ray_s": ray_s,
        "local": local_rows,
        "ray": ray_rows,
        "same_verdicts": [r["category"] for r in local_rows] == [r["category"] for r in ray_rows],
    }


PARTS = {"local": part_local, "aa": part_aa, "ray": part_ray}


def environment() -> dict:
    import torch
    import triton

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,driver_version,pci.bus_id", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "gpus": smi.splitlines(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "commit": commit,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--parts", default="local,aa,ray")
    ap.add_argument("--shapes", default="4096x8000", help="shapes the 8 candidates are judged on")
    ap.add_argument("--aa-shapes", default="16384x8192,4096x8000")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--candidates", type=int, default=8)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "scaleout.json"
    summary = json.loads(out.read_text()) if out.exists() else {}
    summary["environment"] = environment()
    task = load_task(TASK)
    with tempfile.TemporaryDirectory(prefix="scaleout-") as tmp:
        for name in args.parts.split(","):
            t0 = time.monotonic()
            try:
                result = PARTS[name](args, task, Path(tmp))
            except Exception as e:  # recorded, and the other parts still run
                result = {"error": f"{type(e).__name__}: {e}"}
            result["part_s"] = round(time.monotonic() - t0, 1)
            result["at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            summary[name] = result
            out.write_text(json.dumps(summary, indent=2, default=str))
            print(name, json.dumps(result, default=str)[:600], flush=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
