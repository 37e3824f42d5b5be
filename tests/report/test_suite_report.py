"""The suite's report (`kernelloop report --suite OUT`, issue #17) over a suite folder laid
out as `kernelloop suite` writes it, from the real measured CPU run (tests/report/
conftest.py): the leaderboard and suite state built by the suite's own functions
(`task_row`, `leaderboard`) from that run's summary; one task with its own report written
by the real report, one without, one that failed, one the suite never finished.

The real suite, end to end, then its report: tests/loop/test_suite.py."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from kernelloop.cli import app
from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.report import write_report
from kernelloop.report.leaderboard import BOARD, STATE, leaderboard, task_row
from kernelloop.report.render import default_folder
from kernelloop.report.suite import write_suite_report
from kernelloop.task import load_task
from tests.report.test_report import _section, _table

FAILED = "the task's baseline fails its own checks (max abs error 3.1); fix the task first."
LOST = "the executor lost the evaluation: its Ray actor died twice: Ray actor 0 (...)"


def _copy(measured_run, dst: Path) -> Path:
    shutil.copytree(measured_run[0], dst)
    return dst


def _own_report(folder: Path, run_id: int) -> Path:
    """The task's own report, written where `kernelloop report TASK` writes it."""
    task = load_task(folder)
    with HistoryStore.open(folder / ".kernelloop" / "history.sqlite") as store:
        where = default_folder(store.path.parent, run_id)
        write_report(store, task.name, task.spec.rules, where, run_id=run_id)
    return where / "report.html"


@pytest.fixture
def suite_out(measured_run, tmp_path) -> tuple[Path, dict]:
    """OUT of a suite of four: `fast` (its own report written), `lossy` (the same run, one
    proposal lost to the infrastructure, no report written), `broken` (failed) and
    `cut` (started, never finished: not in the leaderboard)."""
    summary = measured_run[1]
    fast = _copy(measured_run, tmp_path / "tasks" / "fast")
    lossy = _copy(measured_run, tmp_path / "tasks" / "lossy")
    _own_report(fast, summary["run_id"])
    lost = copy.deepcopy(summary)
    lost["attempts"][-1].update(status="infrastructure", infra_reason=LOST)
    # `fast` as a suite on a GPU records it: its best timed against torch.compile too.
    timed = {**summary, "best_speedup_vs_compiled": 1.25}
    state = {
        "fast": {"status": "done", "folder": str(fast), "summary": timed},
        "lossy": {"status": "done", "folder": str(lossy), "summary": lost},
        "broken": {"status": "done", "folder": str(tmp_path), "summary": None, "error": FAILED},
        "cut": {"status": "started", "folder": str(tmp_path / "tasks" / "cut")},
    }
    out = tmp_path / "out"
    out.mkdir()
    (out / STATE).write_text(json.dumps(state, indent=2))
    rows = [
        task_row(n, state[n]["summary"], state[n].get("error", ""), state[n]["folder"])
        for n in ("fast", "lossy", "broken")
    ]
    board = leaderboard(rows)
    (out / BOARD).write_text(json.dumps(board, indent=2))
    return out, board


def test_the_suite_report_is_the_leaderboard_with_its_tasks_and_failures(
    measured_run, suite_out, tmp_path
):
    out, board = suite_out
    summary = measured_run[1]
    files = write_suite_report(out, tmp_path / "review")
    md = files.markdown.read_text()
    # The table: the leaderboard's rows, in order, with its numbers.
    table = _table(md, "Leaderboard")
    assert [r[0] for r in table] == ["fast", "lossy", "broken"]
    for cells, row in zip(table, board["tasks"], strict=True):
        assert cells[1] == row["status"] and cells[2] == ("yes" if row["correct"] else "no")
        speed = "–" if row["speedup"] is None else f"{row['speedup']:.3f}x"
        assert cells[3] == speed and cells[6] == str(row["rounds"])
    # The speedup over torch.compile where the best was timed against it, else "–".
    assert [r[4] for r in table] == ["1.250x", "–", "–"]
    assert table[0][8] == f"{summary['wall_s']:.0f}" and table[2][8] == "–"
    # fast_p as the suite computed it, with counts of the tasks.
    fast_p = _table(md, "fast_p")
    assert [(p, f) for p, f, _ in fast_p] == [
        (k.removeprefix("fast_"), f"{v:.2f}") for k, v in board["fast_p"].items()
    ]
    assert fast_p[0][2] == f"{round(board['fast_p']['fast_0'] * 3)} of 3"
    # Totals: tasks, correct, cost and the runs' wall time summed.
    head = md.split("## fast_p", 1)[0]
    correct = sum(r["correct"] for r in board["tasks"])
    assert "| Tasks | 3: 2 finished, 1 failed or never ran; 1 more in suite.json" in head
    assert f"| Correct | {correct} of 3 |" in head
    cost = sum(r["cost_usd"] for r in board["tasks"])
    assert f"| Model cost | {cost:.4f} USD |" in head
    assert f"| Wall time | {2 * summary['wall_s']:.0f} s, the tasks' runs summed (1 task(s)" in head
    assert "| Task reports | 1 of 3 written |" in head
    # Each task's own report: linked (relative, and the link leads to it), or its command.
    link = re.search(r"\[html\]\(<([^>]+)>\)", table[0][9]).group(1)
    own = default_folder(out.parent / "tasks" / "fast" / ".kernelloop", summary["run_id"])
    assert (files.html.parent / unquote(link)).resolve() == (own / "report.html").resolve()
    lossy = out.parent / "tasks" / "lossy"
    assert f"not written: `kernelloop report {lossy} --run {summary['run_id']}`" in table[1][9]
    # Called out, each with its reason: the failure, the lost proposal, the unfinished task.
    attention = _section(md, "Needs attention")
    said = dict(re.findall(r"^- \*\*(\w+)\*\*[^:]*: (.*)$", attention, re.M))
    assert said["broken"] == f"failed: {FAILED}"
    assert (
        f"1 proposal(s) lost to infrastructure failures, never judged (first: {LOST})"
        in (said["lossy"])
    )
    assert said["cut"].startswith("never finished: the suite is running it now, or stopped")
    assert "run the same `kernelloop suite` command again to continue it" in said["cut"]
    if summary["status"] == "needs review":  # the stall rule may stop the measured run
        assert said["fast"] == f"the run asks for review: {summary['reason']}"
    else:
        assert "fast" not in said


def test_the_suite_html_is_self_contained_but_for_its_task_links(suite_out, tmp_path):
    out, _ = suite_out
    html = write_suite_report(out, out).html.read_text()
    assert "://" not in html and "@import" not in html
    assert not re.search(r"<(script|link|img|iframe|object)\b", html)
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert len(hrefs) == 1 and (out / unquote(hrefs[0])).is_file(), hrefs
    # Its style is the per-task report's (one stylesheet, included by both templates).
    assert "td.num { text-align: right;" in html
    assert '<td class="fail">error</td>' in html and "<b>cut</b>" in html


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "report", *map(str, args)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )


def test_report_suite_command_writes_beside_the_leaderboard(suite_out):
    out, _ = suite_out
    done = _cli("--suite", out)
    assert done.returncode == 0, done.stderr
    assert f"report of the suite in {out.resolve()} written to {out.resolve()}" in done.stdout
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    # A suite's folder given as TASK is taken as the suite.
    (out / "report.md").unlink()
    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert (out / "report.md").read_text().startswith(f"# kernelloop suite report: {out}")


def test_report_suite_errors_are_one_sentence_with_the_fix(suite_out, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _cli("--suite", empty)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = " ".join(done.stderr.split())
    assert f"has no {BOARD}; run `kernelloop suite TASK… --out" in said, said
    out, _ = suite_out
    (out / BOARD).unlink()
    cases = [
        (["--suite", str(out)], "has no leaderboard.json yet: its suite has not finished (3 of 4"),
        (["--suite", str(tmp_path / "nowhere")], "is not a folder; pass --suite the --out folder"),
        (["--suite", str(empty), "--run", "1"], "--run and --workspace pick one task's run"),
        (["--suite", str(empty), str(empty)], "pass a task folder or --suite OUT, not both"),
        ([], "pass a task folder, or --suite OUT"),
    ]
    for args, sentence in cases:
        result = CliRunner().invoke(app, ["report", *args])
        assert isinstance(result.exception, KernelloopError), (args, result.output)
        assert sentence in str(result.exception), (args, str(result.exception))
    (out / BOARD).write_text("{not json")
    with pytest.raises(KernelloopError, match="cannot be read as a leaderboard"):
        write_suite_report(out, out)
