"""`kernelloop mcp` on the measured path (the plain-PyTorch CPU task, whose CPU timings
count): a winner is benchmarked, gated, promoted and becomes the git best; flat rounds end
the run with "needs review", as in `kernelloop run`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from kernelloop.evaluate.trusted.clock.timing_checks import BUSY
from kernelloop.history import open_task_memory
from kernelloop.task import load_task
from tests import busy
from tests.conftest import ROOT

CPU_TASK = ROOT / "examples" / "cpu_task"


async def _session(folder: Path) -> dict:
    env = {"PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(
        command=sys.executable,
        env=env,
        cwd=str(ROOT),
        args=[
            "-m",
            "kernelloop.cli",
            "mcp",
            str(folder),
            "--device",
            "cpu",
            "--shapes",
            "256x1024,2048x16",
        ],
    )  # a common and a long-tail shape
    cand = lambda name: (CPU_TASK / "candidates" / name).read_text()  # noqa: E731
    out = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def submit(key: str, source: str, claim: str) -> None:
            if lost := _lost_to_load(out):  # the session is lost: do not pay for the rest
                out[key] = {"error": lost}
                return
            res = await session.call_tool(
                "submit_candidate",
                {"source": source, "claim": claim, "prediction": "-"},
                read_timeout_seconds=400,
            )
            out[key] = (
                json.loads(res.content[0].text)
                if not res.is_error
                else {"error": res.content[0].text}
            )

        await submit("fast", cand("fast.py"), "Whole-tensor fp32 instead of float64 row chunks.")
        await submit("slow", cand("slow.py"), "Float64 throughout with a second mean-square pass.")
        await submit(
            "tail", cand("tail_trap.py"), "Per-row loop for short rows, whole-tensor for long ones."
        )
        await submit("again", cand("slow.py"), "Float64 again, a second pass for safety, reworded.")
        await submit("after", cand("fast.py").replace("\n", "\n\n", 1), "One more try.")
        if _lost_to_load(out):
            return out
        res = await session.call_tool("variant", {"ref": "best"})
        text = res.content[0].text
        out["best"] = {"error": text} if res.is_error else json.loads(text)
    return out


def _noise_refused(res: dict) -> bool:
    # "rejected [slower]" since the one vocabulary (task/words.py): the retry on noise had
    # stopped firing (CI rehearsal, 2026-12-07: a 3.56x win refused under 3 x noise).
    return str(res.get("verdict", "")).startswith("rejected") and (
        "does not beat the required" in str(res.get("outcome", ""))
    )


def _lost_to_load(out: dict) -> str:
    """Why a submission was lost to a busy machine (`not evaluated`, or the baseline
    refused as a tool error), or ""."""
    for res in out.values():
        if not isinstance(res, dict):
            continue
        if res.get("verdict") == "not evaluated":
            why = str(res.get("infra_reason") or res.get("outcome", ""))
        else:
            why = str(res.get("error", ""))
        if BUSY in why:
            return why
    return ""


def test_winner_is_promoted_and_flat_rounds_stop_for_review(tmp_path):
    # The CPU gate's noise on fewer than 5 paired rounds is known to be pessimistic
    # (docs/benchmarking.md, "Known defect: the CPU gate's round size"): CI rehearsals saw
    # a 4.3x win (session 17) and a 5.05x win (session 18, noise 144%) refused. A refusal
    # for noise gets one fresh session; refused twice, the test fails. It never accepts a
    # win the gate refused.
    # A session lost to a busy machine (a submission `not evaluated` because the trusted
    # side refused to time: tests/busy.py) is tried again after waiting for quiet, at most
    # busy.TRIES sessions in all, then skipped with the reason: never judged on the
    # machine's account, never passed without the gate's verdicts.
    noise_tries, busy_tries = 0, 0
    while True:
        folder = tmp_path / f"task{noise_tries + busy_tries}"
        shutil.copytree(
            CPU_TASK, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__")
        )
        out = anyio.run(_session, folder)
        if lost := _lost_to_load(out):
            busy_tries += 1
            if busy_tries >= busy.TRIES:
                pytest.skip(f"the machine stayed too busy to time on: {lost[:200]}")
            busy.wait_for_quiet()
        elif _noise_refused(out["fast"]) and noise_tries == 0:
            noise_tries += 1
        else:
            break
    fast, slow, tail, again = out["fast"], out["slow"], out["tail"], out["again"]
    # The CPU has no approved runs in this history, so the new best awaits a person's sign-off;
    # the session builds on it (as the loop does) while git and the history keep the old best.
    assert (
        fast["verdict"] == "promoted" and fast["new_best"] and fast["pending_approval"] is True
    ), fast
    assert fast["best"]["id"] == fast["id"] and fast["best"]["objective_vs_baseline"] > 1.0
    assert fast["best"]["per_shape"] and all(r["median_ms"] for r in fast["best"]["per_shape"])
    assert slow["verdict"] == "rejected [slower]" and slow["category"] == "slower", slow
    assert tail["verdict"].startswith("rejected [") and "long tail" in "; ".join(tail["reasons"]), (
        tail
    )
    assert again["verdict"] == "refused", again
    # Three flat rounds after the win: the stall rule ends the run for a person.
    assert (
        again["run"]["status"] == "needs review" and "consecutive rounds" in again["run"]["reason"]
    )
    assert "error" in out["after"] and "needs review" in out["after"]["error"]
    assert len(fast["best"]["per_shape"]) == 2
    task = load_task(folder)
    store, _ = open_task_memory(task)
    with store:
        assert store.pending_best(task.name).id == fast["id"]
        baseline = store.promoted_best(task.name)
        assert baseline.round == 0
        assert [r.status for r in store.runs(task.name)] == ["needs review"]
    head = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "kernelloop/cpu_rmsnorm_residual/best"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert head == baseline.commit_sha == out["best"]["commit"] != fast["commit"]
    assert out["best"]["source"] == (CPU_TASK / "baseline.py").read_text()
