"""The rendered report in a real browser (issue 36: "a rendered report, HTML looked at in
a headless browser, with the diff"): headless Chromium loads report.html from disk and
its DOM holds the best's diff against the baseline and the parent, with the added and
removed lines marked. Skipped where no Chromium is installed (CI's runner has none)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.report import write_report
from tests.report.test_review import _run

BROWSER = next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
)


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed")
def test_the_diff_shows_in_a_headless_browser(tmp_path):
    folder, task, store, run, ids, sources, versions = _run(tmp_path)
    out = write_report(store, task.name, task.spec.rules, tmp_path / "r")
    done = subprocess.run(
        [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom",
         out.html.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "The code under review: the best's diff" in dom, dom[:2000]
    assert f"best #{ids[2]} against baseline #{ids[0]}" in dom
    assert f"best #{ids[2]} against parent #{ids[1]}" in dom
    diffs = dom.split('<pre class="diff">')[1:]
    assert len(diffs) == 2, dom
    assert '<span class="del">-CHUNK_ROWS = 32</span>' in diffs[0]
    assert '<span class="add">+CHUNK_ROWS = 128</span>' in diffs[0]
    assert "xs.square()" in diffs[1] and "CHUNK_ROWS = 128" not in diffs[1].split("</pre>")[0]
