"""`kernelloop mcp` as an external agent meets it: the server is a real subprocess on stdio,
spoken to with the MCP SDK's own client; evaluations run in the real sandbox (Triton
interpreter, one small CPU shape), and the history and git are read back afterwards."""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from kernelloop.history import open_task_memory
from kernelloop.task import load_task
from tests.conftest import FLAGSHIP, FUSED, ROOT

CHEAT = FLAGSHIP / "scripted" / "02_torch_shortcut.py"
# the cheat (screened out before round 0), honest, a second unparsable source in a row,
# a duplicate, the cheat again (screened out in a running run), an interface change; a
# seventh submission must be refused by the budget
ROUNDS = 6
BROKEN = (
    "import torch\n\ndef forward(x, residual, weight, bias, *, p, eps, seed):\n    return (x +\n"
)


def _task_copy(tmp: Path) -> Path:
    dst = tmp / "task"
    shutil.copytree(FLAGSHIP, dst, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    return dst


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _conversation(folder: Path, marker: Path) -> dict:
    env = {
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
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
            "7x129",
            "--dtypes",
            "float32",
            "--rounds",
            str(ROUNDS),
        ],
    )
    out: dict = {"progress": []}

    async def progress(value, total, message):
        out["progress"].append(message)

    async def call(
        name: str, args: dict | None = None, *, with_progress: bool = False
    ) -> tuple[bool, str]:
        res = await session.call_tool(
            name,
            args or {},
            read_timeout_seconds=400,
            progress_callback=progress if with_progress else None,
        )
        return res.is_error, _text(res)

    fused = FUSED.read_text()
    # The PyTorch shortcut, plus a last line that leaves a file behind if this process ever
    # imports it.
    cheat = (
        CHEAT.read_text()
        + f"\nimport pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
    )
    signature = fused.replace(
        "def forward(x, residual, weight, bias, *, p, eps, seed):",
        "def forward(x, residual, weight, bias, *, p, eps, seed, scale=1.0):",
    )
    assert signature != fused
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
        out["task"] = json.loads((await call("task"))[1])

        async def timed(key: str, args: dict, **kw) -> None:
            t0 = time.monotonic()
            out[key] = json.loads((await call("submit_candidate", args, **kw))[1])
            out[f"{key}_s"] = time.monotonic() - t0

        # First, a source the static screen refuses: answered before round 0 is evaluated.
        await timed(
            "cheat",
            {
                "source": cheat,
                "claim": "Call PyTorch's layer_norm and softmax directly.",
                "prediction": "faster than three hand-written kernels",
            },
        )
        out["history_before"] = json.loads((await call("history"))[1])
        await timed(
            "honest",
            {
                "source": fused,
                "claim": "Fuse the three kernels into one, one row per program.",
                "prediction": "about 1.3x on the common shapes",
            },
            with_progress=True,
        )
        out["profile"] = json.loads((await call("profile"))[1])
        # Unparsable twice in a row once the run is going: the first is free, the second
        # is judged as a round.
        for key in ("unparsable_1", "unparsable_2"):
            out[key] = json.loads(
                (
                    await call(
                        "submit_candidate",
                        {"source": BROKEN, "claim": "fused", "prediction": "1.2x"},
                    )
                )[1]
            )
        out["duplicate"] = json.loads(
            (
                await call(
                    "submit_candidate",
                    {
                        "source": fused,
                        "claim": "One program per row, all three stages fused in registers.",
                        "prediction": "a large win",
                    },
                )
            )[1]
        )
        await timed(
            "cheat_again",
            {"source": cheat, "claim": "Library ops, which are tuned.", "prediction": "-"},
        )
        out["interface"] = json.loads(
            (
                await call(
                    "submit_candidate",
                    {
                        "source": signature,
                        "claim": "Add a scale parameter to the entry.",
                        "prediction": "none",
                    },
                )
            )[1]
        )
        out["over_budget"] = await call(
            "submit_candidate",
            {
                "source": fused.replace("NUM_WARPS = 8", "NUM_WARPS = 4"),
                "claim": "Fewer warps.",
                "prediction": "1%",
            },
        )
        out["no_claim"] = await call(
            "submit_candidate", {"source": fused, "claim": " ", "prediction": ""}
        )
        out["history"] = json.loads((await call("history", {"limit": 50}))[1])
        out["variant"] = json.loads((await call("variant", {"ref": str(out["honest"]["id"])}))[1])
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    folder, marker = _task_copy(tmp), tmp / "imported-by-server"
    out = anyio.run(_conversation, folder, marker)
    return folder, marker, out


def test_tools_and_task_description(served):
    _, _, out = served
    assert out["tools"] == ["history", "profile", "submit_candidate", "task", "variant"]
    task = out["task"]
    assert task["entry"] == "forward"
    assert task["entry_signature"] == "def forward(x, residual, weight, bias, *, p, eps, seed)"
    assert [s["shape"] for s in task["shapes"]] == ["7x129"] and task["dtypes"] == ["float32"]
    assert task["baseline_source"] == (FLAGSHIP / "baseline.py").read_text()
    assert "edit point" in task["rules"] and task["timings_count"] is False
    assert task["best"]["id"] is None and task["run"]["status"] == "not started"
    assert task["run"]["rounds_left"] == ROUNDS
    # The contract the loop's LLM agents read, with the run's device and shape selection.
    contract = task["contract"]
    assert (FLAGSHIP / "reference.py").read_text().strip() in contract
    assert "7x129 (rows=7, cols=129): weight 0.1, long_tail; judged in this run" in contract
    assert "float32: atol=2e-05, rtol=0.005" in contract
    assert "need NOT match the baseline" in contract and "DO NOT count" in contract


def test_honest_candidate_passes_the_same_gate_as_a_loop_round(served):
    folder, _, out = served
    h = out["honest"]
    # Correct in the interpreter, but interpreter timings never promote a kernel.
    assert h["verdict"] == "judged correct, not timed" and h["category"] == "accepted", h
    assert h["new_best"] is False and h["best"]["objective_vs_baseline"] == 1.0
    assert "do not count" in h["outcome"]
    assert h["round"] == 2 and h["run"]["rounds_left"] == ROUNDS - 2
    assert any(m and m.startswith("checking r2_1") for m in out["progress"]), out["progress"]

    # The variant is a git commit on its own branch, parented on the baseline's commit.
    def git(*a):
        cmd = ["git", "-C", str(folder), *a]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    assert git("rev-parse", h["branch"]) == h["commit"]
    kernel = load_task(folder).spec.task.baseline
    assert git("show", f"{h['commit']}:{kernel}") + "\n" == FUSED.read_text()
    base = out["history"]["attempts"][0]
    assert base["round"] == 0 and base["claim"] == "baseline"
    assert git("rev-parse", f"{h['commit']}^") == base["commit"]
    assert out["variant"]["source"] == FUSED.read_text() and out["variant"]["commit"] == h["commit"]
    # The best's profile summary is what the loop's agents see (compile facts on a CPU).
    assert (
        out["profile"]["of"] == f"best #{base['id']}"
        and "register" in out["profile"]["summary"].lower()
    )


def test_screened_source_is_refused_before_round_0_and_never_imported(served):
    _, marker, out = served
    c = out["cheat"]
    # The static screen's reason, the round spent (as a loop round whose only proposal was
    # refused), and nothing evaluated: no run started, no baseline in the history.
    assert c["verdict"] == "refused" and c["round_spent"] is True, c
    assert "static screen: line" in c["refused_reason"], c
    assert "uses `torch.nn.functional.layer_norm`" in c["refused_reason"], c
    assert c["run"]["status"] == "not started" and c["run"]["rounds_used"] == 1, c
    assert c["best"]["id"] is None and c["commit"] is None
    assert out["history_before"]["attempts"] == []
    # Answered without the baseline's evaluation, which the next submission then paid for.
    assert out["cheat_s"] < 30 and out["cheat_s"] * 3 < out["honest_s"], (
        out["cheat_s"],
        out["honest_s"],
    )
    # Its first line writes this file when imported; the server only screened it.
    assert not marker.exists()


def test_screened_source_in_a_running_run_is_refused_unevaluated(served):
    _, marker, out = served
    c = out["cheat_again"]
    assert c["verdict"] == "refused" and c["round_spent"] is True and c["round"] == 5, c
    assert c["refused_reason"].startswith("static screen: line"), c
    assert c["commit"] is None and c["accepted"] is None and not c["category"], c
    assert "refused before evaluation: static screen" in c["outcome"], c
    assert not marker.exists()


def test_second_unparsable_source_in_a_row_is_judged_and_spends_a_round(served):
    _, _, out = served
    first, second = out["unparsable_1"], out["unparsable_2"]
    assert first["verdict"] == "unparsable" and first["round_spent"] is False, first
    assert "line 4" in first["outcome"] and first["run"]["rounds_used"] == 2, first
    assert second["verdict"] == "refused" and second["round_spent"] is True, second
    assert second["round"] == 3 and second["run"]["rounds_used"] == 3, second
    assert "not valid Python (line 4" in second["refused_reason"], second
    assert second["commit"] is None and second["accepted"] is None


def test_duplicate_and_policy_refusals_cost_no_evaluation(served):
    _, _, out = served
    d, i = out["duplicate"], out["interface"]
    assert d["verdict"] == "refused" and "identical" in d["refused_reason"], d
    assert d["commit"] is None and d["accepted"] is None
    assert i["verdict"] == "refused" and (
        "signature" in i["refused_reason"] or "interface" in i["refused_reason"]
    ), i
    assert i["commit"] is None


def test_budget_and_bad_input_are_clear_errors(served):
    _, _, out = served
    is_error, text = out["over_budget"]
    assert is_error and "run has ended (finished: all rounds done" in text, text
    is_error, text = out["no_claim"]
    assert is_error and "needs a claim" in text, text


def test_history_records_every_submission_like_a_loop_round(served):
    folder, _, out = served
    task = load_task(folder)
    store, _ = open_task_memory(task)
    with store:
        runs = store.runs(task.name)
        assert len(runs) == 1 and runs[0].agent == "external"
        assert runs[0].status == "finished"
        rows = store._conn.execute(
            "SELECT p.round, p.agent, p.hypothesis, p.predicted_effect, p.refused_reason, "
            "p.commit_sha, e.category FROM proposals p "
            "LEFT JOIN evaluations e ON e.proposal_id = p.id ORDER BY p.id"
        ).fetchall()
        rounds = store._conn.execute(
            "SELECT round, finished_at FROM rounds WHERE run_id = ? ORDER BY round", (runs[0].id,)
        ).fetchall()
        [(claimed, started)] = store._conn.execute(
            "SELECT claimed_at, started_at FROM runs WHERE id = ?", (runs[0].id,)
        ).fetchall()
    # The session's stretch began before the baseline was judged (the run's row is written
    # after it): a crash's running time then counts the baseline too.
    assert datetime.fromisoformat(claimed) < datetime.fromisoformat(started), (claimed, started)
    # The screened-out first submission is recorded as round 1 once round 0 is.
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [r[1] for r in rows[1:]] == ["external"] * 6
    assert (
        rows[1][2].startswith("Call PyTorch's") and "static screen" in rows[1][4] and not rows[1][5]
    )
    assert (
        rows[2][2].startswith("Fuse the three kernels")
        and rows[2][3] == "about 1.3x on the common shapes"
    )
    assert [r[6] for r in rows] == ["accepted", None, "accepted", None, None, None, None]
    assert all(r[4] and not r[5] for r in rows[3:]), rows
    assert [r[0] for r in rounds] == [1, 2, 3, 4, 5, 6] and all(r[1] for r in rounds)
    digest = out["history"]["digest"]
    assert "Fuse the three kernels" in digest
