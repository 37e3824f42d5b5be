"""The per-element kept/dropped check of a stochastic output (compare_mask.py), property
tested: honest dropout of a term under a residual of any size passes in every dtype; the
term missing, replaced, dropped at the wrong rate or by a mask shared across rows fails."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelloop.evaluate.trusted.values.compare_mask import (
    infer_mask,
    neighbours_problem,
    rate_problem,
    ulp,
)
from kernelloop.task.spec import Tolerance

TOL = {  # the flagship's tolerances
    torch.bfloat16: Tolerance(atol=1e-5, rtol=2e-2),
    torch.float16: Tolerance(atol=1e-5, rtol=1e-2),
    torch.float32: Tolerance(atol=2e-5, rtol=5e-3),
}
DTYPES = list(TOL)
SIGMAS = 6.0


def _case(seed: int, rows: int, cols: int, scale: float, p: float, dtype):
    """Float64 kept and dropped references (residual·scale + softmax/(1-p), residual·scale,
    the residual already in `dtype` as an input is) and an honest output: the mask drawn,
    the sum in float32, rounded once to `dtype`."""
    g = torch.Generator().manual_seed(seed)
    r = (scale * torch.randn(rows, cols, generator=g)).to(dtype).to(torch.float64)
    s = torch.softmax(torch.randn(rows, cols, generator=g, dtype=torch.float64), dim=-1)
    keep, drop = r + s / (1 - p), r
    mask = torch.rand(rows, cols, generator=g) >= p
    s32 = (s / (1 - p)).to(torch.float32)
    out = (r.to(torch.float32) + torch.where(mask, s32, 0.0)).to(dtype)
    return keep, drop, mask, out


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    rows=st.integers(2, 9),
    cols=st.integers(16, 700),
    scale=st.sampled_from([0.0, 1e-3, 1.0, 30.0, 6e4]),
    p=st.sampled_from([0.1, 0.5]),
    dtype=st.sampled_from(DTYPES),
)
def test_honest_dropout_passes_in_every_dtype_under_any_residual(seed, rows, cols, scale, p, dtype):
    keep, drop, mask, out = _case(seed, rows, cols, scale, p, dtype)
    inf = infer_mask(out, keep, drop, TOL[dtype])
    assert inf.ok, inf.reason
    dec = inf.decidable
    # where decidable, the inferred mask is the one drawn
    assert torch.equal(inf.dropped[dec], ~mask[dec])
    assert rate_problem(inf, keep, drop, p, SIGMAS) is None
    assert neighbours_problem(inf, p, SIGMAS) is None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), p=st.sampled_from([0.1, 0.5]))
def test_the_residual_alone_where_it_is_large_fails_the_rate(seed, p):
    """Red team (a): out = residual where |residual| > 1. Each such element is a dropped
    value, so the dropped fraction there is far above p (fp32: every element decidable)."""
    keep, drop, mask, out = _case(seed, 8, 300, 1.0, p, torch.float32)
    out = torch.where(drop.abs() > 1, drop.to(torch.float32), out)
    inf = infer_mask(out, keep, drop, TOL[torch.float32])
    assert inf.ok  # each element is a kept or a dropped value...
    why = rate_problem(inf, keep, drop, p, SIGMAS)
    assert why is not None and why.startswith("dropped fraction")  # ...at the wrong rate


def test_a_compensated_rate_still_fails_its_stratum():
    """The residual alone where |residual| > 1, and fewer drops elsewhere so that the overall
    fraction is p: the stratum of large dropped values still shows it."""
    p = 0.1
    keep, drop, _, _ = _case(7, 16, 500, 1.0, p, torch.float32)
    large = drop.abs() > 1
    frac = large.double().mean().item()
    assert frac > p  # the large ones alone are more than p: nothing dropped elsewhere
    out = torch.where(large, drop, keep).to(torch.float32)
    inf = infer_mask(out, keep, drop, TOL[torch.float32])
    assert inf.ok
    why = rate_problem(inf, keep, drop, frac, SIGMAS)  # the overall fraction fits `frac`
    assert why is not None and "where |the dropped value| in its quartile" in why, why


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), dtype=st.sampled_from([torch.float32, torch.float16]))
def test_a_uniform_term_where_the_residual_is_large_is_neither_value(seed, dtype):
    """Red team (b): the softmax term replaced by 1/cols where |residual| > 1."""
    p, cols = 0.1, 129
    keep, drop, mask, out = _case(seed, 7, cols, 1.0, p, dtype)
    uniform = (drop + 1.0 / cols / (1 - p)).to(torch.float32).to(dtype)
    out = torch.where((drop.abs() > 1) & mask, uniform, out)
    inf = infer_mask(out, keep, drop, TOL[dtype])
    assert not inf.ok and "neither a kept nor a dropped value" in inf.reason


def test_the_old_tolerance_relative_to_the_sum_would_have_hidden_it():
    """What this check replaced: |out − kept| <= atol + rtol·|kept| took the residual alone
    for a kept value wherever |residual| > 2 in float32 on 3001 columns (rtol·|kept| = 1e-2
    ≫ softmax); now nearly each such element is decidable (all but a softmax value under
    ~2·atol), and decided dropped."""
    keep, drop, _, _ = _case(3, 3, 3001, 1.0, 0.1, torch.float32)
    tol = TOL[torch.float32]
    large = drop.abs() > 2
    assert int(large.sum()) > 10
    assert bool(((drop - keep).abs() <= tol.atol + tol.rtol * keep.abs())[large].all())
    inf = infer_mask(torch.where(large, drop, keep).to(torch.float32), keep, drop, tol)
    dec = inf.decidable & large
    assert inf.ok and int(dec.sum()) > 0.8 * int(large.sum()) and bool(inf.dropped[dec].all())


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), p=st.sampled_from([0.1, 0.5]))
def test_wrong_rate_and_shared_masks_fail(seed, p):
    keep, drop, _, _ = _case(seed, 8, 400, 1.0, p, torch.float32)
    g = torch.Generator().manual_seed(seed)
    tol = TOL[torch.float32]
    # (c) twice the rate (p = 0.5: every element dropped)
    wrong = torch.rand(keep.shape, generator=g) < min(2 * p, 1.0)
    inf = infer_mask(torch.where(wrong, drop, keep).to(torch.float32), keep, drop, tol)
    assert inf.ok and rate_problem(inf, keep, drop, p, SIGMAS) is not None
    # (d) one row's mask for every row: the right rate on average (the shared draws make
    # its count vary 8x more, so the rate test alone catches it now and then), rows dependent
    row = torch.rand(1, keep.shape[1], generator=g) < p
    shared = row.expand_as(keep)
    inf = infer_mask(torch.where(shared, drop, keep).to(torch.float32), keep, drop, tol)
    assert inf.ok
    why = neighbours_problem(inf, p, SIGMAS)
    assert why is not None and why.startswith("the masks of rows 1 apart"), why
    # a mask constant along each row
    col = (torch.rand(keep.shape[0], 1, generator=g) < p).expand_as(keep)
    inf = infer_mask(torch.where(col, drop, keep).to(torch.float32), keep, drop, tol)
    assert inf.ok
    assert rate_problem(inf, keep, drop, p, SIGMAS) or neighbours_problem(inf, p, SIGMAS)


def test_nonfinite_and_out_of_range_values():
    keep = torch.tensor([[1.0, 7e4], [2.0, 3.0]], dtype=torch.float64)
    drop = torch.tensor([[0.5, 7e4 - 1.0], [1.0, 2.0]], dtype=torch.float64)
    tol = TOL[torch.float16]
    # beyond float16's range both values round to +inf: inf is the right answer there
    out = torch.where(torch.tensor([[True, True], [False, True]]), keep, drop).to(torch.float16)
    assert torch.isinf(out[0, 1]) and infer_mask(out, keep, drop, tol).ok
    bad = out.clone()
    bad[1, 0] = float("nan")
    inf = infer_mask(bad, keep, drop, tol)
    assert not inf.ok and inf.category == "nonfinite" and "[1, 0]" in inf.reason


def test_ulp_is_the_dtype_spacing_at_the_value():
    v = torch.tensor([1.0, 1.5, 2.0, 3e4, 0.0, -0.75], dtype=torch.float64)
    assert ulp(v, torch.bfloat16).tolist() == [2**-7, 2**-7, 2**-6, 2**7, 2**-133, 2**-8]
    assert ulp(v, torch.float32)[0].item() == 2**-23
    for dtype in DTYPES:  # one unit up is the next value; just under half a unit rounds back
        x = torch.tensor([1.3, 700.0, 1e-3, -5.0], dtype=torch.float64).to(dtype).double()
        u = ulp(x, dtype)
        assert torch.equal((x + u).to(dtype).double(), x + u)
        assert torch.equal((x + 0.49 * u).to(dtype).double(), x)
