"""The floors and the "nevers" of ARCHITECTURE.md, as import-linter contracts
(`[tool.importlinter]` in pyproject.toml), checked over the real source on every test
run; and proof that the check bites: a copy of the source with one arrow drawn the wrong
way breaks the contract that forbids it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the package found in `src`, with the repository's contracts."""
    assert LINT.is_file(), f"{LINT} is missing: install the dev extras (pip install -e '.[dev]')"
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [str(LINT), "--no-cache", "--config", str(ROOT / "pyproject.toml")]
    return subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_graph_keeps_every_contract():
    res = _lint(ROOT / "src")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    assert "0 broken" in out and "BROKEN" not in out, out[-6000:]


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # A lower floor reaching up to the loop: the arrow the issue found (step <-> runview).
        ("objective.py", "import kernelloop.loop.view", "Floors"),
        ("loop/round.py", "import kernelloop.loop.driver", "The loop wing"),
        ("agents/tuner.py", "import kernelloop.evaluate.trusted.run", "Agents never evaluate"),
        (
            "evaluate/trusted/values/plan.py",
            "import kernelloop.history.store",
            "Evaluation never knows",
        ),
        ("history/digest.py", "import kernelloop.loop.state", "The store never knows"),
        ("loop/view.py", "import kernelloop.objective", "The view never computes"),
        (
            "evaluate/trusted/values/judge.py",
            "import kernelloop.evaluate.worker.calls",
            "The trust boundary",
        ),
        (
            "evaluate/worker/timing.py",
            "import kernelloop.evaluate.trusted.values.compare",
            "The trust boundary",
        ),
        # The channel knows nothing of judging; the screen nothing of the clock.
        (
            "evaluate/trusted/channel/wire.py",
            "import kernelloop.evaluate.trusted.values.judge",
            "The trusted side by role",
        ),
        (
            "evaluate/trusted/screen/static_rules.py",
            "import kernelloop.evaluate.trusted.clock.timing_checks",
            "The trusted side by role",
        ),
        # The circle issue 37 found, drawn again: the model importing its view.
        ("profile/summary.py", "import kernelloop.profile.render", "No circles"),
    ],
)
def test_an_arrow_drawn_the_wrong_way_breaks_its_contract(tmp_path, module, line, contract):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "src" / "kernelloop", src / "kernelloop", ignore=ignore)
    path = src / "kernelloop" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402, F401\n")
    res = _lint(src)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-4000:]
    # "NAME BROKEN" or "NAME BROKEN (3 ignored imports)"
    broken = [ln for ln in out.splitlines() if " BROKEN" in ln]
    assert any(ln.startswith(contract) for ln in broken), (contract, broken, out[-4000:])


MAX_LINES = 400  # ARCHITECTURE.md: a file past this is split by role


def test_no_source_file_is_over_400_lines():
    """Issue 37's house rule, held in CI: the newcomer's file is one role, readable whole."""
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
        for p in (ROOT / "src" / "kernelloop").rglob("*.py")
    }
    assert len(sizes) > 100, "the package was not found"
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert not over, f"split these by role (ARCHITECTURE.md): {over}"
