"""The precision check behind a compute floor beaten (issue 46 item 2): a float32 kernel
faster than float32-accurate arithmetic allows for the reference's algorithm has either
rewritten the algebra (fewer flops: honest, a review) or computed below float32 precision
(plain TF32: what `[precision] tf32 = false` forbids). The two are told apart by the error,
not the clock: on every float32 value check where the task measures its own model's error
(`model_margin`, own_error.py) the record keeps both shares of the tolerance, and a
candidate whose share is PRECISION_RATIO times PyTorch's own on the same inputs is not
computing at float32 precision. TF32's 10-bit mantissa against float32's 23 puts a TF32
GEMM ~10^3 times past PyTorch's float32 error; honest float32 kernels with another
summation order stay within a few times it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelloop.evaluate.trusted.values.record import CheckResult

PRECISION_RATIO = 64.0


def precision_excess(checks: Iterable[CheckResult]) -> tuple[float, CheckResult] | None:
    """The largest ratio, over the passed float32 value checks where both were measured,
    of the candidate's share of the tolerance to the task's own float32 model's share on
    the same inputs; None where no check measured both."""
    worst: tuple[float, CheckResult] | None = None
    for c in checks:
        if c.dtype != "float32" or not c.passed or c.tol_used is None or not c.own_tol_used:
            continue
        ratio = c.tol_used / c.own_tol_used
        if worst is None or ratio > worst[0]:
            worst = (ratio, c)
    return worst


def below_precision(shapes: list[str], checks: Iterable[CheckResult]) -> str:
    """'' unless the candidate beat the reference algorithm's float32 compute floor on
    `shapes` and its error is PRECISION_RATIO times PyTorch's own; then the finding."""
    if not shapes:
        return ""
    found = precision_excess(checks)
    if found is None or found[0] < PRECISION_RATIO:
        return ""
    ratio, c = found
    return (
        f"computes below float32 precision: faster than float32-accurate arithmetic allows "
        f"for the reference's algorithm on {', '.join(shapes)}, and its error on "
        f"{c.suite}/{c.case} {c.shape} float32 is {ratio:.0f}x PyTorch's own float32 error on "
        f"the same inputs (at most {PRECISION_RATIO:g}x is float32 arithmetic), which this "
        'task forbids ([precision] tf32 = false): pass input_precision="ieee", or set '
        "tf32 = true where the task allows TF32"
    )
