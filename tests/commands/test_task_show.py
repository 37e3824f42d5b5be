"""`kernelloop task show TASK` prints the contract the prompt and the MCP `task` tool
carry (real CLI, real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import FLAGSHIP


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "task", "show", str(FLAGSHIP), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_task_show_prints_the_contract_for_the_chosen_device(tmp_path):
    out = show("--device", "cpu", "--workspace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert (FLAGSHIP / "reference.py").read_text().strip() in text
    assert "Timings here DO NOT count" in text
    assert "16384x8192 (rows=16384, cols=8192): weight 0.35, common; floor 0.1886 ms" in text
    assert "bfloat16: atol=1e-05, rtol=0.02" in text
    assert "need NOT match the baseline" in text


def test_task_show_json_gives_each_section(tmp_path):
    out = show("--device", "cpu", "--dtypes", "float32", "--json", "--workspace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    sections = json.loads(out.stdout)
    assert list(sections) == [
        "judging", "interface", "reference", "inputs", "shapes", "numerics", "randomness",
        "roofline",
    ]  # fmt: skip
    assert "Dtypes judged: float32" in sections["numerics"]
