"""`kernelloop history | rollback | export | approve` run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernels import HYP_MULTIROW, HYP_ONLINE, SOFTMAX_MULTIROW, SOFTMAX_ONLINE, SOFTMAX_PARENT
from records import make_record

from kernelloop.history import HistoryStore, history_path
from kernelloop.task import load_task
from kernelloop.versions import Versions

RUNNER = Path(__file__).parent / "cli_runner.py"
AWKWARD = (
    SOFTMAX_ONLINE.encode().replace(b"\n", b"  \r\n", 3).rstrip(b"\n")
)  # CRLF, trailing blanks, no EOL


def kl(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "220", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, str(RUNNER), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def simulate_run(task_dir: Path, arch: str = "sm_90", pending: bool = False) -> dict[str, int]:
    """What the loop writes for a short run: baseline, a rejected and an accepted variant."""
    task = load_task(task_dir)
    v = Versions.open(task.folder, task.name, task.spec.task.baseline)
    ids: dict[str, int] = {}
    with HistoryStore.open(history_path(task.folder)) as store:
        run = store.start_run(
            task.name, task.digest(), agent="llm", device_name="NVIDIA H200", arch=arch
        )
        store.start_round(run, 0)
        ids["base"] = store.add_proposal(
            run, 0, source=SOFTMAX_PARENT, hypothesis="baseline", agent="baseline"
        )
        c = v.commit_baseline(run, SOFTMAX_PARENT.encode())
        store.set_commit(ids["base"], c.commit, c.branch)
        store.add_evaluation(
            ids["base"], make_record(), objective=1.0, per_shape={"4096x8000": 1.0}
        )
        store.set_best(run, ids["base"])
        store.finish_round(run, 0)
        store.start_round(run, 1)
        for name, src, hyp, accepted, obj in (
            ("slow", SOFTMAX_MULTIROW.encode(), HYP_MULTIROW, False, 0.94),
            ("fast", AWKWARD, HYP_ONLINE, True, 1.25),
        ):
            pid = store.add_proposal(
                run,
                1,
                k=len(ids),
                source=src.decode(),
                hypothesis=hyp,
                parent_id=ids["base"],
                agent="llm",
                model="strong-model",
            )
            c = v.commit_variant(run, 1, len(ids), src, hyp, proposal_id=pid)
            store.set_commit(pid, c.commit, c.branch)
            store.add_model_call(
                run, 1, "strong-model", "anthropic", 3000, 1500, 0.0375, 12.0, proposal_id=pid
            )
            category = "accepted" if accepted else "slower"
            reasons = () if accepted else ("slower than best by 6.0% (noise 0.9%)",)
            per_shape = {"4096x8000": obj, "1024x32768": obj * 1.1}
            store.add_evaluation(
                pid,
                make_record(accepted, category, reasons, per_shape),
                objective=obj,
                per_shape=per_shape,
            )
            if accepted:
                store.set_best(run, pid, pending_approval=pending)
                if not pending:
                    v.set_best(c.commit)
            ids[name] = pid
        store.finish_round(run, 1)
        store.finish_run(run, "finished")
    return ids


def test_history_without_a_run_is_a_usage_error_with_the_fix(task_dir):
    out = kl("history", task_dir)
    assert out.returncode == 2
    assert "no history for task softmax" in out.stderr and "kernelloop run" in out.stderr
    assert "Traceback" not in out.stderr


def test_history_table_and_json(task_dir):
    ids = simulate_run(task_dir)
    out = kl("history", task_dir)
    assert out.returncode == 0, out.stderr
    for text in (
        "Process 4 rows per program",
        "rejected [slower]",
        "promoted ★",
        "1.250x (+25.0%)",
        "0.940x (-6.0%)",
        "1024x32768 +37.5%",
        "$0.0375",
        "best: #3",
    ):
        assert text in out.stdout, (text, out.stdout)
    rows = json.loads(kl("history", task_dir, "--json").stdout)
    assert [r["id"] for r in rows] == [ids["base"], ids["slow"], ids["fast"]]
    assert rows[1]["reasons"] == ["slower than best by 6.0% (noise 0.9%)"]


def test_rollback_restores_a_generation_byte_for_byte_and_moves_the_best(task_dir):
    ids = simulate_run(task_dir)
    kernel = task_dir / "kernel" / "baseline.py"
    out = kl("rollback", task_dir, "--to", str(ids["fast"]))
    assert out.returncode == 0, out.stderr
    assert kernel.read_bytes() == AWKWARD
    assert "previous contents saved on kernelloop/softmax/backup/" in out.stdout
    out = kl("rollback", task_dir, "--to", str(ids["slow"]))
    assert out.returncode == 0 and kernel.read_bytes() == SOFTMAX_MULTIROW.encode()
    with HistoryStore.open(history_path(task_dir)) as store:
        assert store.promoted_best("softmax").id == ids["slow"]
    v = Versions.open(task_dir, "softmax", "kernel/baseline.py")
    assert v.read(v.best()) == SOFTMAX_MULTIROW.encode()
    # elsewhere, without touching the kernel file or the best
    out = kl("rollback", task_dir, "--to", str(ids["fast"]), "--output", task_dir / "copy.py")
    assert (
        task_dir / "copy.py"
    ).read_bytes() == AWKWARD and kernel.read_bytes() == SOFTMAX_MULTIROW.encode()


def test_rollback_to_an_unknown_id_is_a_usage_error(task_dir):
    simulate_run(task_dir)
    out = kl("rollback", task_dir, "--to", "999")
    assert out.returncode == 2 and "kernelloop history" in out.stderr


def test_export_makes_a_reviewable_branch_with_the_record(task_dir):
    ids = simulate_run(task_dir)
    out = kl("export", task_dir)
    assert out.returncode == 0, out.stderr
    git = ["git", "-C", str(task_dir)]
    msg = subprocess.run(
        [*git, "log", "-1", "--format=%B", "kernelloop/softmax/export"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert msg.startswith("kernelloop: softmax best kernel, 1.250x over baseline")
    assert "1024x32768: 1.375x" in msg and "verdict: judged correct" in msg
    assert f"Kernelloop-Proposal: {ids['fast']}" in msg and "Kernelloop-Device: NVIDIA H200" in msg
    show = subprocess.run(
        [*git, "show", "kernelloop/softmax/export:kernel/baseline.py"],
        capture_output=True,
        check=True,
    ).stdout
    assert show == AWKWARD
    md = subprocess.run(
        [*git, "show", "kernelloop/softmax/export:kernel/BENCHMARK.md"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        "online softmax" in md and "| 4096x8000 | bfloat16 |" in md and '"candidate_sha256"' in md
    )


@pytest.mark.parametrize("arch_flag", [[], ["--arch", "sm_120"]])
def test_a_best_on_a_new_architecture_exports_only_after_approval(task_dir, arch_flag):
    ids = simulate_run(task_dir, arch="sm_120", pending=True)
    out = kl("export", task_dir)
    assert out.returncode == 2 and "kernelloop approve" in out.stderr
    out = kl("approve", task_dir, *arch_flag, "--by", "alice", "--note", "checked on prod traces")
    assert out.returncode == 0, out.stderr
    assert f"approved #{ids['fast']} on sm_120" in out.stdout
    assert kl("export", task_dir).returncode == 0
    with HistoryStore.open(history_path(task_dir)) as store:
        assert [(a.approver, a.proposal_id) for a in store.approvals("sm_120")] == [
            ("alice", ids["fast"])
        ]
    assert kl("approve", task_dir).returncode == 2  # nothing left to approve


def test_a_gain_short_of_the_bar_shows_the_gain_the_gate_required():
    """`rejected [slower]` beside "+3.0%" read as a contradiction: the row now says what the
    gate required (its reason's `required ...x`), and only where the candidate was faster."""
    from tests.loop.test_feedback import attempt

    from kernelloop.commands.history_cmds import _objective_cell

    why = (
        "weighted geomean speedup 1.0300x over the best does not beat the required 1.0520x "
        "(max(min_gain 2.0%, 3 x noise 1.73%))",
    )
    short = attempt(accepted=False, category="slower", objective=1.03, parent_objective=1.0,
                    reasons=why)  # fmt: skip
    assert _objective_cell(short) == "1.030x (+3.0%, needed +5.2%)"
    slower = attempt(accepted=False, category="slower", objective=0.9, parent_objective=1.0,
                     reasons=why)  # fmt: skip
    assert _objective_cell(slower) == "0.900x (-10.0%)"  # plainly slower: nothing to explain
    won = attempt(accepted=True, category="accepted", objective=1.2, parent_objective=1.0)
    assert _objective_cell(won) == "1.200x (+20.0%)"
    assert _objective_cell(attempt(objective=None)) == "–"
