"""One vocabulary from the CLI to the report, JSON included (issue 47, item 9): a real CPU
run of the flagship with the tuner, then `history` (table and `--json`), `export`, `report`
and `evaluate` (text and `--json`). "Accepted" once meant four things there: CPU `evaluate`
printed ACCEPTED, `run` "correct, not timed", the report's header "2 accepted" where nothing
was promoted, `history` +0.0% for shapes never timed, `export` "1.000x over baseline".
Every outcome is now said in the words of task/words.py; the stored verdict's `accepted` and
`category` fields keep their names for the JSON readers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from kernelloop.task import words
from tests.conftest import FLAGSHIP, ROOT

FAST = ["--device", "cpu", "--shapes", "7x129", "--dtypes", "float32"]
# "accept" in any form, as a word a reader sees (not the JSON key, checked apart).
ACCEPT = re.compile(r"accept", re.IGNORECASE)


def _kl(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kernelloop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _verdicts(rows: list[dict]) -> set[str]:
    return {r["verdict"].partition(" [")[0] for r in rows}


@pytest.mark.slow
def test_one_word_set_across_cli_report_and_json(tmp_path):
    task = tmp_path / "task"
    shutil.copytree(FLAGSHIP, task, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    run = _kl("run", str(task), "--rounds", "1", "--candidates", "1", *FAST, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    hist = _kl("history", str(task), cwd=tmp_path)
    rows = json.loads(_kl("history", str(task), "--json", cwd=tmp_path).stdout)
    export = _kl("export", str(task), cwd=tmp_path)
    report = _kl("report", str(task), cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    md = next((task / ".kernelloop" / "reports").glob("run-*/report.md")).read_text()
    ev = _kl("evaluate", str(task), str(task / "baseline.py"), *FAST, cwd=tmp_path)
    ev_json = json.loads(
        _kl("evaluate", str(task), str(task / "baseline.py"), "--json", *FAST, cwd=tmp_path).stdout
    )
    message = subprocess.run(
        [
            "git",
            "-C",
            str(task),
            "log",
            "-1",
            "--format=%B",
            f"kernelloop/{FLAGSHIP.name}/export",
        ],
        capture_output=True,
        text=True,
    ).stdout

    # Nothing the reader sees says "accepted": not the CLI, not the report, not the export.
    for name, text in {
        "run": run.stdout,
        "history": hist.stdout,
        "export": export.stdout + message,
        "report.md": md,
        "evaluate": ev.stdout,
    }.items():
        assert not ACCEPT.search(text), (name, ACCEPT.search(text), text[-3000:])
    # The same words everywhere: the round's candidate was judged correct but never timed.
    assert f"{words.NOT_TIMED}" in run.stdout, run.stdout
    assert f"{words.NOT_TIMED}" in hist.stdout and words.BASELINE in hist.stdout, hist.stdout
    assert "+0.0%" not in hist.stdout and "1.000x" not in hist.stdout, hist.stdout
    assert f"0 promoted, 1 {words.NOT_TIMED}" in md, md
    assert f"| {words.NOT_TIMED} |" in md, md
    assert "1.000x over baseline" not in message and "not timed" in message, message
    assert f"{words.JUDGED_CORRECT_HEADLINE}, not timed" in ev.stdout, ev.stdout
    # JSON: `verdict` (history) and `outcome` (evaluate) in the word set; the stored
    # verdict keeps its fields, and `timed` says what the objective is.
    assert _verdicts(rows) <= set(words.OUTCOMES), rows
    assert [r["verdict"] for r in rows] == [words.BASELINE, words.NOT_TIMED], rows
    assert [r["timed"] for r in rows] == [False, False], rows
    assert rows[1]["accepted"] is True and rows[1]["category"] == "accepted", rows[1]
    assert ev_json["outcome"] == words.NOT_TIMED and ev_json["verdict"]["accepted"], ev_json
    # The share of the tolerance used (docs/task.md "Tolerances"): in the verdict and JSON.
    used = ev_json["tol_used_max"]
    assert 0 < used["share"] <= 1 and used["check"].split("/")[0] in {
        "random",
        "extreme",
        "stochastic",
        "e2e",
    }
    assert max(c["tol_used"] or 0 for c in ev_json["checks"]) == used["share"], used
    assert "of the tolerance used (" in ev.stdout, ev.stdout
