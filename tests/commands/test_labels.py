"""Every command says which stage decided a verdict: a static refusal is never printed as a
timing failure (`kernelloop bench` once said "PERFORMANCE GATE: FAIL (timing)" for one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelloop.commands.labels import headline, stage
from tests.conftest import FLAGSHIP, ROOT

REFUSED = (
    "import os\nimport torch\n\n"
    "def forward(x, residual, weight, bias, *, p, eps, seed):\n    return torch.empty_like(x)\n"
)


@pytest.mark.parametrize(
    "category, accepted, text",
    [
        ("static", False, "REJECTED at the static screen (policy)"),
        ("no_kernel", False, "REJECTED by correctness (no_kernel)"),
        ("tamper", False, "REJECTED by correctness (tamper)"),
        ("timing", False, "REJECTED by the performance gate (timing)"),
        ("slower", False, "REJECTED by the performance gate (slower)"),
        ("policy", False, "REFUSED by the loop's rules (policy)"),
        ("internal", False, "NOT JUDGED: kernelloop's trusted side failed (internal)"),
        ("accepted", True, "JUDGED CORRECT"),
    ],
)
def test_headline_names_the_stage(category, accepted, text):
    assert headline(category, accepted) == text


def test_every_category_has_a_stage():
    from typing import get_args

    from kernelloop.evaluate.trusted.values.record import Category

    assert {stage(c) for c in get_args(Category)} == {
        "judged correct",
        "static screen",
        "policy",
        "performance gate",
        "correctness",
        "internal",  # the trusted side's own failure: not a verdict on the candidate
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, note",
    [("evaluate", "(not run)"), ("bench", "(not benchmarked)"), ("profile", "(not profiled)")],
)
def test_commands_label_a_static_rejection(tmp_path, command, note):
    cand = tmp_path / "refused.py"
    cand.write_text(REFUSED)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelloop.cli",
            command,
            str(FLAGSHIP),
            str(cand),
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=_env(),
    )
    out = " ".join(r.stdout.split())  # Rich wraps long lines
    assert r.returncode == 1, r.stderr[-2000:]
    assert f"REJECTED at the static screen (policy) {note}: " in out and "imports `os`" in out, out
    # the stage line may list timing among the stages that never ran, nothing more
    assert "performance gate" not in out and "timing" not in out.replace("e2e, timing", ""), out


def _env():
    import os

    return {**os.environ, "COLUMNS": "200"}
