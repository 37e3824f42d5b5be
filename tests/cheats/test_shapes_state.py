"""Undeclared shapes and kept state (issue 33), pure-Triton candidates on the flagship, no
screen bypass, each rejected on the CPU for what it is:

- a kernel correct only for row counts that are a multiple of 64 (every declared CPU shape
  has fewer than 64 rows) and one wrong only for odd column counts (judged on an even
  declared width) fail on the undeclared tile shape (evaluate/trusted/values/undeclared.py);
- a kernel that caches its output by input address, by seed or by shape is `stateful`:
  the determinism suite's refill call brings the same tensors holding new values with the
  same seed (trusted/values/judge_state.py).
"""

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all

JOBS = {
    "rows_multiple_of_64.py": {},
    "even_cols_only.py": {"shapes": "5x1000"},
    "cache_by_pointer.py": {},
    "cache_by_seed.py": {},
}
UNDECLARED = "wrong on undeclared shape"
STATEFUL = "caching it by input address, shape or seed is hidden state"


@pytest.fixture(scope="module")
def records(flagship):
    return evaluate_all(flagship, {n: {"path": CANDIDATES / n, **kw} for n, kw in JOBS.items()})


@pytest.mark.parametrize("name", ["rows_multiple_of_64.py", "even_cols_only.py"])
def test_a_kernel_wrong_off_the_declared_shapes_is_rejected_saying_so(records, flagship, name):
    rec = records[name]
    # elements it never writes hold the call's poison: NaN bytes on some calls (issue 45)
    assert rec.verdict.category in ("wrong", "nonfinite"), rec.verdict.reasons
    first = rec.verdict.reasons[0]
    assert UNDECLARED in first and "must be correct for every shape the op accepts" in first
    listed = {s.label for s in [*flagship.spec.shapes, *flagship.spec.cpu_shapes]}
    failed = {c.shape for c in rec.failed_checks()}
    assert failed and not failed & listed, failed  # every declared shape passed
    rows, cols = (int(v) for v in next(iter(failed)).split("x"))
    if name == "rows_multiple_of_64.py":
        assert rows >= 64 and rows % 64, rows
    else:
        assert cols % 2 == 1, cols
    assert "undeclared shape" in rec.verdict.judged_on


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("cache_by_pointer.py", ""),
        ("cache_by_seed.py", "same input tensors (same data_ptr) refilled with new values"),
    ],
)
def test_a_kernel_that_replays_a_kept_output_is_stateful(records, name, how):
    rec = records[name]
    assert rec.verdict.category == "stateful", rec.verdict.reasons
    # or earlier, where two calls drew the same seed (seeds as people pass them: 0, 42, ...)
    # and the kernel returned the first's output for the second's inputs
    reason = rec.verdict.reasons[0]
    assert STATEFUL in reason and (how in reason or "output of an earlier call" in reason), reason


@pytest.mark.gpu
def test_on_a_gpu_too(flagship):
    """On the H200 every declared row count is a multiple of 64 (1024 ... 65536): only the
    undeclared tile shape shows the skipped tile; the caches meet the refill as on the CPU."""
    gpu = {"device": "cuda", "shapes": None, "dtypes": ["bfloat16"], "timeout_s": 600}
    jobs = {n: {"path": CANDIDATES / n, **gpu} for n in JOBS if n != "even_cols_only.py"}
    jobs["even_cols_only.py"] = {
        "path": CANDIDATES / "even_cols_only.py",
        **gpu,
        "shapes": "16384x8192,65536x1024",
    }
    recs = evaluate_all(flagship, jobs, workers=1)
    for name in ("rows_multiple_of_64.py", "even_cols_only.py"):
        # On the H200 the skipped tile held whatever the poisoned output held: `nonfinite`
        # (2026-12-03, 4983 elements); on the CPU it reads as `wrong`. Either way named.
        assert recs[name].verdict.category in ("wrong", "nonfinite"), recs[name].verdict.reasons
        assert UNDECLARED in recs[name].verdict.reasons[0]
    for name in ("cache_by_pointer.py", "cache_by_seed.py"):
        assert recs[name].verdict.category == "stateful", recs[name].verdict.reasons
        assert STATEFUL in recs[name].verdict.reasons[0]
