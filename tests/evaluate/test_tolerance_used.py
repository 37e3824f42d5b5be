"""The share of the tolerance a candidate used, max |out - ref| / (atol + rtol·|ref|), is
kept with each value check and shown (issue 47, item 12: computed, never shown); and
`max rel err` is |out - ref| / max(|ref|, atol), as docs/task.md "Tolerances" says."""

from __future__ import annotations

import pytest
import torch

from kernelloop.evaluate.trusted.values.compare import within_tolerance
from kernelloop.task.spec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)


def _ref() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 33, generator=g, dtype=torch.float64)
    ref[0, 0] = 0.0  # where atol alone bounds the error
    return ref


@pytest.mark.parametrize("share", [0.0, 0.25, 0.9, 1.5])
def test_the_share_used_is_the_worst_element_against_its_own_bound(share):
    ref = _ref()
    bound = TOL.atol + TOL.rtol * ref.abs()
    out = ref + share * bound  # every element at the same share of its own bound
    out[5, 7] = ref[5, 7] + share * 0.5 * bound[5, 7]  # one better: not the worst
    cmp = within_tolerance(out, ref, TOL)
    assert cmp.passed is (share <= 1.0)
    assert cmp.tol_used == pytest.approx(share, rel=1e-9, abs=1e-12)
    # max rel err: the error over max(|ref|, atol), so the element at 0 counts against atol
    rel = ((out - ref).abs() / ref.abs().clamp_min(TOL.atol)).max().item()
    assert cmp.max_rel_err == pytest.approx(rel)


def test_a_float32_output_is_judged_as_stored():
    ref = _ref()
    out = ref.to(torch.float32)  # the rounding of float32 alone: far below the tolerance
    cmp = within_tolerance(out, ref, TOL)
    assert cmp.passed and 0 < cmp.tol_used < 1e-4, cmp
