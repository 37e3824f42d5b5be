"""The house style holds over the whole repository: `ruff check` (the rules in
pyproject.toml, line length included) and `ruff format --check` both pass. Uses the ruff
installed beside the interpreter running the tests (the dev extra pins it), so the verdict
does not depend on whichever ruff happens to be on PATH."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PATHS = ["src", "tests", "benchmarks", "examples", "scripts"]


def _ruff() -> list[str]:
    exe = Path(sys.executable).parent / "ruff"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize(
    "args",
    [["check", "--no-cache", "--output-format", "concise"], ["format", "--no-cache", "--check"]],
    ids=["check", "format"],
)
def test_ruff_passes_over_the_repository(args):
    cmd = [*_ruff(), *args, *PATHS]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = (res.stdout + res.stderr)[-8000:]
    assert res.returncode == 0, f"`{' '.join(cmd)}` failed (fix or run `ruff format`):\n{out}"
