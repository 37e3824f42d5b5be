"""`kernelloop import kernelbench DIR --check` (issue 46's self-survey) through the real CLI
on the CPU: each imported problem's own baseline judged and its output's regions checked,
one row per problem in survey.json, the timing checks "not run" off a GPU, and exit 1
when a problem fails a check (a problem that computes a constant: no check can judge it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from kernelloop.commands.import_survey import AA_MAX, TIMERS_MAX, timing_checks
from tests.bench.records import record

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_cpu_survey_judges_each_baseline_and_names_what_failed(tmp_path):
    src = tmp_path / "problems"
    src.mkdir()
    shutil.copy(FIXTURES / "kernelbench" / "level1" / "19_ReLU.py", src / "19_ReLU.py")
    shutil.copy(FIXTURES / "kernelbench_extra" / "constant_output.py", src / "constant_output.py")
    # A problem the importer refuses is a failed row too (it was left out of the survey).
    (src / "broken.py").write_text("class Model:\n    pass\n\nraise RuntimeError('boom')\n")
    out = tmp_path / "tasks"
    res = subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "import", "kernelbench", str(src), "--out",
         str(out), "--check", "--device", "cpu"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    # exit 2: a problem was not imported (said last); a failed survey alone exits 1
    assert res.returncode == 2, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads((out / "survey.json").read_text())
    assert (doc["device"], doc["problems"], doc["passed"]) == ("cpu", 3, 1), doc
    rows = {r["problem"]: r for r in doc["rows"]}
    broken = rows["broken.py"]
    assert not broken["passed"], broken
    assert "not a KernelBench problem" in broken["checks"]["imported"], broken
    relu, const = rows["19_ReLU.py"], rows["constant_output.py"]
    assert relu["passed"] and relu["checks"]["judged"] == "ok" and relu["checks"]["regions"] == "ok"
    assert relu["checks"]["A/A"].startswith("not run: timed on a GPU only"), relu
    assert not const["passed"] and const["checks"]["judged"].startswith("setup: "), const
    assert "survey: 1 of 3 baselines passed every check on cpu" in " ".join(res.stdout.split())


def test_the_timing_checks_read_the_aa_pair_the_timers_and_the_floor():
    shapes = ("256x1024", "512x512", "2048x16", "8x16384")
    quiet = record({s: 1.0 for s in shapes}, aa_diff=AA_MAX / 2)
    for sb in quiet.shapes:
        sb.floor_ms = 0.5
        sb.impls["candidate"].profiler_ms = 0.99
    assert timing_checks(quiet) == {"A/A": "ok", "events vs profiler": "ok", "floor": "ok"}
    bad = record({s: 1.0 for s in shapes}, aa_diff=0.03)
    for sb in bad.shapes:
        sb.floor_ms = 1.2  # the baseline below its floor: the floor is wrong
        sb.impls["candidate"].profiler_ms = 1.0 / (1 + 2 * TIMERS_MAX)
    got = timing_checks(bad)
    assert "256x1024 3.0% apart" in got["A/A"]
    assert "events 1.0000 ms, profiler 0.9091 ms" in got["events vs profiler"]
    assert "below the floor 1.2000 ms" in got["floor"]
