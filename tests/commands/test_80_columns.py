"""Help legible at 80 columns (issue 47, item 11): `run --help` was 137 lines with flag
names cut (`--allow-unsandbo…`). Through the real CLI, in a subprocess, with COLUMNS=80
(the history table at 80 columns: tests/history/test_narrow.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

COMMANDS = ["run", "suite", "evaluate", "bench", "history", "report", "task show", "mcp"]


def _at_80(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "kernelloop", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _flags(command: str) -> list[str]:
    """Every option name the command takes, from click itself."""
    import typer.main

    from kernelloop.cli import app

    cmd = typer.main.get_command(app)
    for word in command.split():
        cmd = cmd.commands[word]
    return [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns_shows_every_flag_whole(command):
    out = _at_80(*command.split(), "--help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, out.stdout
    names = [line.strip("│ ").split()[0] for line in lines if line.strip("│ ").startswith("--")]
    for flag in _flags(command):
        assert flag in names, (flag, out.stdout)  # whole, at the head of its own line
    assert not any("…" in line and "--" in line.split("…")[0][-30:] for line in lines), out.stdout
    if command == "run":  # 21 options in groups, not one panel of 137 lines
        assert len(lines) <= 80, out.stdout
        for panel in ("Who proposes", "Rounds", "What is judged", "Where evaluations run"):
            assert f"─ {panel} ─" in out.stdout, out.stdout
