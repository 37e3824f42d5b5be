"""What the reviewer approves, and how to check it again (issue 36): the best's diff
against the baseline and against its parent, every proposal's commit with a command that
fetches its source (real git) and evaluates it as the run did, and the run's interruptions
with the time spent stopped. Records are written through the history's own API; no
timing is involved, so a busy machine cannot change the outcome."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

from kernelloop.evaluate.trusted.values.record import (
    CheckResult,
    Environment,
    EvaluationRecord,
    Verdict,
)
from kernelloop.history import HistoryStore
from kernelloop.report import write_report
from kernelloop.report.review import Repro
from kernelloop.task import load_task
from kernelloop.versions import Versions
from tests.loop.test_measured_cpu import CPU_TASK

CONFIG = {"device": "cpu", "shapes": "512x512", "dtypes": ["float32"], "rounds": 2}


def _record(name: str, accepted: bool = True) -> EvaluationRecord:
    return EvaluationRecord(
        task=name,
        task_digest="d",
        candidate="c.py",
        candidate_sha256="ab",
        started_at="t",
        wall_s=1.0,
        environment=Environment(
            device="cpu", device_name="x86_64", torch="2.13", python="3.11", sandbox="bwrap"
        ),
        checks=[
            CheckResult(suite="random", case="a", shape="512x512", dtype="float32", passed=True)
        ],
        verdict=Verdict(accepted=accepted, category="accepted" if accepted else "wrong"),
    )


def _run(tmp_path):
    """A run of three generations, each committed: baseline -> r1-1 -> r2-1 (the best)."""
    folder = tmp_path / "task"
    shutil.copytree(CPU_TASK, folder, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    task = load_task(folder)
    versions = Versions.open(task.folder, task.name, task.spec.task.baseline)
    base_src = task.baseline_path.read_text()
    r1_src = base_src.replace("CHUNK_ROWS = 32", "CHUNK_ROWS = 128")
    r2_src = r1_src.replace("xs * xs", "xs.square()")
    store = HistoryStore.open(folder / ".kernelloop" / "history.sqlite")
    run = store.start_run(task.name, "d", agent="tuner", config_json=json.dumps(CONFIG))
    ids = []
    for r, src, parent in ((0, base_src, None), (1, r1_src, 0), (2, r2_src, 1)):
        pid = store.add_proposal(
            run,
            r,
            source=src,
            hypothesis=f"gen {r}",
            agent="tuner",
            parent_id=ids[parent] if parent is not None else None,
        )
        v = (
            versions.commit_baseline(run, src)
            if r == 0
            else versions.commit_variant(run, r, 1, src, f"gen {r}", pid)
        )
        store.set_commit(pid, v.commit, v.branch)
        store.add_evaluation(pid, _record(task.name), objective=1.0 + r / 10, per_shape={})
        ids.append(pid)
    store.set_best(run, ids[-1])
    return folder, task, store, run, ids, (base_src, r1_src, r2_src), versions


def test_the_best_s_diffs_commits_and_reproducing_commands(tmp_path):
    folder, task, store, run, ids, sources, versions = _run(tmp_path)
    repro = Repro(
        cli="kernelloop",
        task=str(folder),
        repo=str(versions.repo),
        kernel_path=versions.kernel_path,
    )
    out = write_report(store, task.name, task.spec.rules, tmp_path / "r", repro=repro)
    md, html = out.markdown.read_text(), out.html.read_text()
    # Against the baseline both changes show; against the parent only the last one.
    against_base = md.split(f"### best #{ids[2]} against baseline #{ids[0]}")[1]
    against_base, against_parent = against_base.split(
        f"### best #{ids[2]} against parent #{ids[1]}"
    )
    assert "+CHUNK_ROWS = 128" in against_base and "-CHUNK_ROWS = 32" in against_base
    assert "xs.square()" in against_base
    parent_diff = against_parent.split("\n## ")[0]
    assert "+        ms = (xs.square())" in parent_diff and "+CHUNK_ROWS" not in parent_diff
    assert '<pre class="diff">' in html and '<span class="add">+CHUNK_ROWS = 128</span>' in html
    # Every proposal: its commit, and a command whose `git show` gives back its source and
    # whose evaluate repeats the run's settings.
    for pid, src in zip(ids, sources, strict=True):
        table = md.split("## Every proposal:")[1].split("\n## ")[0]
        row = next(ln for ln in table.splitlines() if ln.startswith(f"| {pid} | "))
        sha = store.attempt(pid).commit_sha
        assert sha and versions.read(sha).decode() == src
        assert f"`{sha[:12]}`" in row, row
        cmd = row.split("| `", 2)[2].rsplit("` |", 1)[0]
        show, rest = cmd.split(" > ", 1)
        got = subprocess.run(shlex.split(show), capture_output=True, text=True, check=True)
        assert got.stdout == src
        args = shlex.split(rest.split("&& ", 1)[1])
        assert args[:4] == ["kernelloop", "evaluate", str(folder), f"kl-{pid}.py"], args
        assert args[4:] == ["--device", "cpu", "--shapes", "512x512", "--dtypes", "float32"]
    assert "The run was never interrupted." in md


def test_interruptions_are_shown_with_the_time_stopped(tmp_path):
    folder, task, store, run, *_ = _run(tmp_path)
    with store:
        store.add_interruption(run, 2)
        store._conn.execute(  # a stop of 30 s, stamped as the loop stamps it
            "UPDATE interruptions SET at = '2026-12-03T10:00:00+00:00', "
            "resumed_at = '2026-12-03T10:00:30+00:00'"
        )
        store._conn.commit()
        md = write_report(store, task.name, task.spec.rules, tmp_path / "r").markdown.read_text()
    assert (
        "| 2 | Ctrl-C | 2026-12-03T10:00:00+00:00 | – | 2026-12-03T10:00:30+00:00 | 30 s |" in md
    ), md
