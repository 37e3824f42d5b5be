"""Issue 45, red team (classes 2, 3 and the rate part of 4): pure-Triton dropout kernels whose
every element is a kept or a dropped value, wrong only in how the mask is drawn — keyed on a
part of the seed, on seed + row, periodic, or at a rate that depends on the inputs or on p.
Each is first shown wrong by running it outside kernelloop (Triton's interpreter, no judge),
then rejected by a real evaluation on the CPU (7x129 float32, tests/cheats/runner.py) as a
`stochastic` failure. Written before the fix: on main 7796788 every one was accepted."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all

ROOT = Path(__file__).parents[2]

CHEATS = [
    "rng_small_seed_skips.py",
    "rng_low16_seed.py",
    "rng_seed_plus_row.py",
    "rng_period16_rows.py",
    "rng_period16_cols.py",
    "rng_rate_by_residual_sign.py",
    "rng_half_rate_mid.py",
    "rng_rate_by_softmax.py",
    "rng_rate_by_column_block.py",
]


def test_each_is_wrong_outside_kernelloop():
    """The defect of each kernel, measured directly (tests/cheats/rng_outside.py: no
    kernelloop code involved), in a fresh interpreter so TRITON_INTERPRET=1 holds."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "tests.cheats.rng_outside"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every defect shown" in out.stdout


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(flagship, {n: {"path": CANDIDATES / n} for n in CHEATS})


@pytest.mark.parametrize("name", CHEATS)
def test_mask_drawn_wrong_is_rejected(records, name):
    rec = records[name]
    assert not rec.verdict.accepted, f"{name} accepted"
    assert rec.verdict.category == "stochastic", rec.verdict.reasons
    assert "ref.0" not in " ".join(rec.verdict.reasons)
