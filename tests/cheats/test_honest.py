"""Zero false rejections: the honest fused candidate, 20 evaluations with fresh secret seeds
(and a fresh unseen shape each time). Measured 2026-11-29 on the 2-core CPU runner: ~7 s
per evaluation alone, so ~80 s two at a time: `slow`."""

import pytest

from tests.cheats.runner import evaluate_all
from tests.conftest import FUSED


@pytest.mark.slow
def test_fused_accepted_in_20_fresh_evaluations(flagship):
    records = evaluate_all(flagship, {f"run{i}": {"path": FUSED} for i in range(20)})
    rejected = {k: r.verdict.reasons[:2] for k, r in records.items() if not r.verdict.accepted}
    assert rejected == {}
    shapes = set()
    for rec in records.values():
        assert all(c.passed for c in rec.checks if c.suite == "sensitivity")
        assert {c.case for c in rec.checks if c.suite == "sensitivity"} >= {
            "zeros",
            "pass-through of residual",
        }
        shapes |= {c.shape for c in rec.checks if c.suite != "e2e"} - {"7x129", "all"}
    assert len(shapes) >= 10  # the unseen shape really is drawn afresh
