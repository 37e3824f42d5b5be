"""Issue 45 red team, run outside kernelloop: each rng_*.py kernel imported under its own
name and called under Triton's interpreter (no judge, no sandbox), its defect measured
directly. Run by tests/cheats/test_rng_independence.py in a subprocess with
TRITON_INTERPRET=1 (set before triton is imported); exits non-zero on a failed check."""

import importlib.util
from pathlib import Path

import torch

CANDIDATES = Path(__file__).parent / "candidates"


def _load(name: str):
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


def main() -> None:
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


if __name__ == "__main__":
    main()
    print("every defect shown")
