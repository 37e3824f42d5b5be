"""Issue 45, red team (classes 2, 3 and the rate part of 4): pure-Triton dropout kernels whose
every element is a kept or a dropped value, wrong only in how the mask is drawn — keyed on a
part of the seed, on seed + row, periodic, or at a rate that depends on the inputs or on p.
Each is first shown wrong by running it outside kernelloop (Triton's interpreter, no judge),
then rejected by a real evaluation on the CPU (7x129 float32, tests/cheats/runner.py) as a
`stochastic` failure. Written before the fix: on main 7796788 every one was accepted."""

import importlib.util
import os

import pytest
import torch

from tests.cheats.runner import CANDIDATES, evaluate_all

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


def _load(name: str):
    os.environ.setdefault("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), CANDIDATES / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mask(mod, rows, cols, p, seed, gen_seed=0):
    """The dropped elements of one call (out - residual == 0) and the inputs."""
    g = torch.Generator().manual_seed(gen_seed)
    x, r = torch.randn(rows, cols, generator=g), torch.randn(rows, cols, generator=g)
    w, b = 1 + 0.1 * torch.randn(cols, generator=g), 0.1 * torch.randn(cols, generator=g)
    out = mod.forward(x, r, w, b, p=p, eps=1e-5, seed=seed)
    return (out - r).abs() < 1e-12, x, r


def _frac(m):
    return m.float().mean().item()


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "1") != "1", reason="runs the kernels on the CPU"
)
def test_each_is_wrong_outside_kernelloop():
    """The defect of each kernel, measured directly (no kernelloop code involved)."""
    m, *_ = _mask(_load("rng_small_seed_skips.py"), 8, 512, 0.3, 42)
    assert _frac(m) == 0.0  # seed 42: nothing dropped at p = 0.3
    mod = _load("rng_low16_seed.py")
    assert torch.equal(_mask(mod, 8, 512, 0.3, 5)[0], _mask(mod, 8, 512, 0.3, 5 + 65536)[0])
    mod = _load("rng_seed_plus_row.py")
    a, b = _mask(mod, 8, 512, 0.3, 1000)[0], _mask(mod, 8, 512, 0.3, 1001)[0]
    assert torch.equal(b[:-1], a[1:])  # seed s+1 = seed s shifted a row
    m = _mask(_load("rng_period16_rows.py"), 48, 128, 0.3, 7)[0]
    assert torch.equal(m[:-16], m[16:])
    m = _mask(_load("rng_period16_cols.py"), 4, 512, 0.3, 7)[0]
    assert torch.equal(m[:, :-16], m[:, 16:])
    m, _, r = _mask(_load("rng_rate_by_residual_sign.py"), 16, 1024, 0.2, 7)
    assert _frac(m[r < 0]) > 0.27 and _frac(m[r >= 0]) < 0.13
    m, *_ = _mask(_load("rng_half_rate_mid.py"), 16, 1024, 0.2, 7)
    assert _frac(m) < 0.13
    m, *_ = _mask(_load("rng_rate_by_column_block.py"), 16, 1024, 0.2, 7)
    assert _frac(m[:, 512:]) < 0.13 and _frac(m[:, :512]) > 0.27
    mod = _load("rng_rate_by_softmax.py")
    m, x, _ = _mask(mod, 16, 1024, 0.2, 7)
    y = torch.nn.functional.layer_norm(x, (1024,))  # ~ the logit (weight ~1, bias ~0)
    assert _frac(m[y < -1.0]) < 0.14 and _frac(m[(y > -0.3) & (y < 0.9)]) > 0.26


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(flagship, {n: {"path": CANDIDATES / n} for n in CHEATS})


@pytest.mark.parametrize("name", CHEATS)
def test_mask_drawn_wrong_is_rejected(records, name):
    rec = records[name]
    assert not rec.verdict.accepted, f"{name} accepted"
    assert rec.verdict.category == "stochastic", rec.verdict.reasons
    assert "ref.0" not in " ".join(rec.verdict.reasons)
