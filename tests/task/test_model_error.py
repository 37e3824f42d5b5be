"""`model_margin` (task/model_error.py): how much of its tolerance an output uses, and the
tolerance a candidate is held to where the task's own model uses more than 1/margin."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from kernelloop.task.model_error import factor, model_used, note, used, widened
from kernelloop.task.spec import Tolerance

TOL = Tolerance(atol=0.01, rtol=0.01, model_margin=4)


def test_used_is_the_largest_error_over_the_tolerance_as_the_judge_compares():
    ref = torch.tensor([1.0, -2.0, 0.0], dtype=torch.float64)
    assert used(ref.float(), ref, TOL) == 0.0
    out = torch.tensor([1.04, -2.0, 0.0])  # 0.04 off where the bound is 0.02
    assert used(out, ref, TOL) == pytest.approx(2.0, rel=1e-5)
    assert used(torch.tensor([1.0, float("nan"), 0.0]), ref, TOL) == math.inf
    assert used(torch.zeros(2), ref, TOL) == math.inf  # wrong shape
    # A float64 value beyond float32's range is float32's infinity (compare.py does so too).
    big = torch.tensor([1e39], dtype=torch.float64)
    assert used(torch.tensor([float("inf")]), big, TOL) == 0.0
    assert used(torch.tensor([3]), torch.tensor([4]), TOL) == 0.0  # integers: exact elsewhere


def test_the_tolerance_widens_only_where_the_model_uses_more_than_one_over_the_margin():
    assert (
        factor(TOL, 0.1) == 1.0 and widened(TOL, 1.0) is TOL and note("float32", TOL, 0.1, 1) == ""
    )
    assert factor(TOL, 3.0) == 12.0
    wide = widened(TOL, 12.0)
    assert (wide.atol, wide.rtol) == pytest.approx((0.12, 0.12))
    assert "the task's doing, not the candidate's" in note("float32", TOL, 3.0, 12.0)
    assert factor(TOL, math.nan) == 1.0  # unmeasured: nothing widened
    assert factor(Tolerance(atol=0.01, rtol=0.01), 3.0) == 1.0  # no margin: as before
    # Several outputs: the worst one counts; a count mismatch is unmeasured.
    ref = torch.ones(2, dtype=torch.float64)
    assert model_used((torch.ones(2), torch.full((2,), 1.04)), [ref, ref], TOL) > 1.9
    assert math.isnan(model_used(torch.ones(2), [ref, ref], TOL))


def test_a_margin_below_one_is_refused_by_the_spec():
    with pytest.raises(ValidationError, match="model_margin"):
        Tolerance(atol=0.01, rtol=0.01, model_margin=0.5)
