"""Candidates per hour with model latency overlapped with judging (`run --overlap`) against
the sequential loop (issue 35). The model is a loopback OpenAI-compatible server on
127.0.0.1 (tests/agents/llm_loopback.py) that answers after a fixed delay; judging is
real (the sandbox, the Triton interpreter on a CPU, or the GPU).

    python benchmarks/overlap.py --rounds 3 --latency 20 --device cpu --shapes 7x129 \
        --dtypes float32 --out benchmarks/results/overlap_cpu.json

Each round the model answers one candidate: the flagship's fused kernel with a different
NUM_WARPS each round (so none is a duplicate). Reports wall time, candidates judged and
candidates per hour for both modes, and the model latency and judging time per round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "agents"))

from llm_loopback import ModelServer, Reply  # noqa: E402

from kernelloop.agents.llm import make_llm_agent  # noqa: E402
from kernelloop.loop import Options, run_loop  # noqa: E402
from kernelloop.loop.view import RunView  # noqa: E402
from kernelloop.task import load_task  # noqa: E402

FLAGSHIP = ROOT / "examples" / "ln_softmax_dropout"
WARPS = [4, 2, 16, 1, 32, 8]


def answer(fused: str, k: int) -> str:
    source = fused.replace("NUM_WARPS = 8", f"NUM_WARPS = {WARPS[k % len(WARPS)]}")
    return (
        f"### Candidate 1\nDirection: fused kernel with {WARPS[k % len(WARPS)]} warps\n"
        f"Hypothesis: try another warp count ({k}).\nPredicted effect: a few %\n\n"
        f"```python\n{source}```\n"
    )


def one(overlap: bool, args: argparse.Namespace) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="kl-overlap-")) / "task"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    fused = (folder / "candidates" / "fused_naive.py").read_text()
    server = ModelServer("openai").start()
    try:
        for k in range(args.rounds + 1):
            server.script.append(Reply(answer(fused, k), delay_s=args.latency))
        task = load_task(folder)
        agent = make_llm_agent(
            "openai:gpt-4.1",
            task=task,
            base_url=server.url,
            env={"OPENAI_API_KEY": "sk-bench"},
            timeout_s=args.latency * 4 + 30,
        )
        opts = Options(
            device=args.device,
            rounds=args.rounds,
            shapes=args.shapes,
            dtypes=args.dtypes.split(",") if args.dtypes else None,
            overlap=overlap,
        )
        t0 = time.monotonic()
        summary = run_loop(task, agent, opts, RunView(live_enabled=False))
        wall = time.monotonic() - t0
    finally:
        server.stop()
        shutil.rmtree(folder.parent, ignore_errors=True)
    judged = [a for a in summary["attempts"] if a["status"] in ("evaluated", "infrastructure")]
    return {
        "overlap": overlap,
        "status": summary["status"],
        "rounds": args.rounds,
        "wall_s_rounds": round(wall, 1),
        "model_requests": len(server.received),
        "candidates_judged": len(judged),
        "verdicts": [a["verdict"] for a in summary["attempts"]],
        "candidates_per_hour": round(3600 * len(judged) / wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency", type=float, default=20.0, help="model answer delay, s")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--dtypes", default=None)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ.setdefault("KERNELLOOP_QUIET", "1")
    results = [one(False, args), one(True, args)]
    seq, ovl = results
    record = {
        "what": "candidates per hour, model latency overlapped with judging vs sequential",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}",
        "device": args.device,
        "model_latency_s": args.latency,
        "shapes": args.shapes,
        "dtypes": args.dtypes,
        "sequential": seq,
        "overlapped": ovl,
        "speedup": round(ovl["candidates_per_hour"] / seq["candidates_per_hour"], 2)
        if seq["candidates_per_hour"]
        else None,
        "command": "python " + " ".join(sys.argv),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
