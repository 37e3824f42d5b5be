"""Issue 33, red team: pure-Triton kernels honest where a p = 0 or residual-free check looks
and wrong where the op is used (p > 0, a residual). Each is rejected on the CPU with a
reason that says what is wrong, never as a protocol violation or a trusted-side error.
One evaluation each on 7x129 float32 (tests/cheats/runner.py)."""

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all

# candidate -> (category, phrases of which the first reason holds one)
CHEATS = {
    # (a) the residual alone where |residual| > 1: those elements are dropped values
    "dropout_residual_where_large.py": ("stochastic", ("dropped fraction",)),
    # (b) 1/cols for the softmax term where |residual| > 1: neither kept nor dropped
    "dropout_uniform_where_large.py": ("wrong", ("neither a kept nor a dropped value",)),
    # (c) dropped with probability 2p
    "dropout_wrong_rate.py": ("stochastic", ("dropped fraction",)),
    # (d) one mask for every row (its count varies 7x more than an independent mask's, so
    # now and then the rate test sees it first)
    "dropout_row_shared_mask.py": ("stochastic", ("must be independent", "dropped fraction")),
}


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(flagship, {n: {"path": CANDIDATES / n} for n in CHEATS})


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_wrong_where_the_op_is_used_is_rejected(records, name):
    category, phrases = CHEATS[name]
    rec = records[name]
    assert not rec.verdict.accepted
    assert rec.verdict.category == category, rec.verdict.reasons
    assert any(p in rec.verdict.reasons[0] for p in phrases), rec.verdict.reasons
    assert "ref.0" not in " ".join(rec.verdict.reasons)
