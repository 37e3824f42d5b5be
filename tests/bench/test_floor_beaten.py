"""A time below the roofline floor is never shown as a % of floor over 100: for the
candidate it is a timing that is not real (or a wrong floor), for a trusted
implementation a floor mistake — said with the numbers (issue 34)."""

from __future__ import annotations

from kernelloop.evaluate.trusted.clock.bench_fill import FLOOR_MARGIN, below_floor, impl_timing
from kernelloop.evaluate.trusted.clock.interleave_types import SlotResult


def _slot(ms: float) -> SlotResult:
    return SlotResult(samples_ms=[ms] * 9, method="events", hidden_calls=0, total_ms=9 * ms)


def test_the_candidate_below_its_floor_is_refused_as_not_real_with_the_numbers():
    problems: list[str] = []
    it = impl_timing("candidate", _slot(1.0), 1.642, problems, "128x4000")
    assert it.pct_of_floor is None
    assert problems == [
        "128x4000: candidate median 1.0000 ms is 164% of the roofline floor 1.6420 ms, which "
        "no kernel can beat: impossible, so the timing is not real (or the task's floor is "
        "wrong)"
    ]


def test_a_trusted_implementation_below_the_floor_names_the_floor_as_wrong():
    why = below_floor("4096", "baseline", 2.26, 4.02)
    assert "a trusted implementation beat it, so the task's floor is wrong" in why
    assert "[roofline] bytes and flops" in why and "178%" in why


def test_within_the_margin_and_above_the_floor_nothing_is_said():
    assert below_floor("s", "candidate", 1.0, 1.0 / FLOOR_MARGIN - 1e-9) == ""
    assert below_floor("s", "candidate", 2.0, 1.0) == ""
    assert below_floor("s", "candidate", 1.0, None) == ""
    problems: list[str] = []
    it = impl_timing("candidate", _slot(2.0), 1.0, problems, "s")
    assert problems == [] and it.pct_of_floor == 50.0


def test_beating_a_float32_compute_floor_names_the_precision_contract(tmp_path):
    """A float32 GEMM faster than float32-accurate arithmetic can be (plain TF32 within a
    loose tolerance) is refused for its precision, which the task's contract forbids —
    said so, with the fix; the honest 3xTF32 solution (1.85 ms on the H200) is not."""
    from pathlib import Path

    from kernelloop.task import load_task
    from kernelloop.task.kernelbench import import_problem
    from kernelloop.task.roofline import floor_on, precision_hint

    kb = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench"
    task = load_task(import_problem(kb / "level2" / "12_Gemm_Multiply_LeakyReLU.py", tmp_path,
                                    ["float32"]))  # fmt: skip
    floor = floor_on(task, task.spec.shapes[0], "float32", "NVIDIA H200")
    hint = precision_hint(task, floor, "float32")
    assert below_floor("1024x8192x8192", "candidate", 1.8483, floor.ms, hint) == ""
    why = below_floor("1024x8192x8192", "candidate", 0.5, floor.ms, hint)
    assert "at full float32" in why and "[precision] tf32 = false" in why
    assert 'input_precision="ieee"' in why
    assert precision_hint(task, floor, "bfloat16") == ""  # bf16 is floored at its own rate


OOM = (
    "baseline: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB (GPU 0; "
    "139.8 GiB total capacity)"
)


def test_a_trusted_implementation_out_of_memory_is_infrastructure_not_the_candidates():
    from kernelloop.evaluate.trusted.bench import out_of_memory
    from kernelloop.gate import performance_gate
    from kernelloop.task.spec import Rules
    from tests.bench.records import record

    said = out_of_memory("baseline", OOM)
    assert said.startswith("the baseline ran out of GPU memory (baseline: torch.OutOfMemory")
    assert "infrastructure, not the candidate's failure" in said and "\n" not in said
    assert out_of_memory("candidate", OOM) == ""  # its own allocation is its own failure
    assert out_of_memory("baseline", "baseline: the worker crashed") == ""
    rec = record(
        {s: 0.5 for s in ("256x1024", "512x512", "2048x16", "8x16384")}, infrastructure=[said]
    )
    res = performance_gate(rec, Rules())
    assert (res.accepted, res.category, res.reasons) == (False, "internal", [said])


# ---- issue 46 item 2: a compute floor bounds the reference's algorithm, not the problem ----


def test_below_the_compute_floor_only_is_a_review_not_a_refusal():
    """KernelBench level2/18: the problem's algebra removes its GEMM, and an honest kernel
    ran at 293% of the GEMM's compute floor (H100, 2026-12-07). Between the memory floor
    and a compute floor the candidate is timed and shown, with a review; below the memory
    floor it is still impossible."""
    from kernelloop.evaluate.trusted.clock.bench_fill import beats_algorithm

    compute, memory = 0.9, 0.1
    assert below_floor("s", "candidate", 0.3, compute, "", memory) == ""
    said = beats_algorithm("s", "candidate", 0.3, compute, memory, "")
    assert "300% of the reference algorithm's compute floor 0.9000 ms" in said
    assert "33% of the memory floor 0.1000 ms" in said and "algebraic rewrite" in said
    assert "precision" not in said and said.endswith("review the kernel")
    problems, reviews = [], []
    it = impl_timing("candidate", _slot(0.3), compute, problems, "s", memory_ms=memory,
                     reviews=reviews)  # fmt: skip
    assert problems == [] and reviews == [said]
    assert it.floor_review == "algebra" and it.pct_of_floor is None and it.median_ms == 0.3
    # Under a float32 precision contract the review says the precision is checked too.
    it = impl_timing("candidate", _slot(0.3), compute, problems, "s", "hint", memory_ms=memory,
                     reviews=reviews)  # fmt: skip
    assert problems == [] and it.floor_review == "precision"
    assert "computes below float32 precision, which this task forbids" in reviews[-1]
    # Below the memory floor: impossible, whatever the algorithm.
    it = impl_timing("candidate", _slot(0.05), compute, problems, "s", "hint", memory_ms=memory,
                     reviews=reviews)  # fmt: skip
    assert len(problems) == 1 and "200% of the roofline floor 0.1000 ms" in problems[0]
    assert "precision" not in problems[0] and it.floor_review == ""
    # A memory-bound floor (compute below memory) is the floor of every algorithm.
    assert beats_algorithm("s", "candidate", 0.05, 0.05, 0.1, "") == ""
    assert "impossible" in below_floor("s", "candidate", 0.05, 0.1, "", 0.1)


def _checks(ratio: float):
    from kernelloop.evaluate.trusted.values.record import CheckResult

    return [
        CheckResult(suite="random", case="random", shape="s", dtype="float32", passed=True,
                    tol_used=0.002 * ratio, own_tol_used=0.002),
        CheckResult(suite="random", case="random", shape="s", dtype="bfloat16", passed=True,
                    tol_used=0.9, own_tol_used=0.001),  # not a float32 check: not read
        CheckResult(suite="random", case="random", shape="t", dtype="float32", passed=True,
                    tol_used=0.5),  # the task's own error not measured: not read
    ]  # fmt: skip


def test_the_gate_tells_an_algebraic_rewrite_from_tf32_by_the_error():
    """Beating the float32 compute floor is a precision finding only where the candidate's
    float32 error is PRECISION_RATIO times PyTorch's own on the same inputs; an honest
    rewrite (error like PyTorch's) passes on to the performance gate."""
    from kernelloop.evaluate.trusted.values.precision import PRECISION_RATIO, below_precision
    from kernelloop.gate import decide
    from kernelloop.task.spec import Rules
    from tests.bench.records import record
    from tests.bench.test_gate import _correctness

    assert below_precision(["s"], _checks(3.0)) == ""
    assert below_precision([], _checks(1000.0)) == ""  # no floor beaten: nothing to explain
    said = below_precision(["s"], _checks(1000.0))
    assert said.startswith("computes below float32 precision") and "1000x" in said
    assert 'input_precision="ieee"' in said and f"at most {PRECISION_RATIO:g}x" in said

    bench = record({s: 0.25 for s in ("256x1024", "512x512", "2048x16", "8x16384")})
    bench.shapes[0].impls["candidate"].floor_review = "precision"
    rewrite = _correctness()
    rewrite.checks = _checks(2.0)
    assert decide(rewrite, bench, Rules()).accepted
    tf32 = _correctness()
    tf32.checks = _checks(5000.0)
    res = decide(tf32, bench, Rules())
    assert (res.accepted, res.category) == (False, "wrong") and "5000x" in res.reasons[0]
    bench.shapes[0].impls["candidate"].floor_review = "algebra"  # no precision contract
    assert decide(tf32, bench, Rules()).accepted


def test_the_compiled_slot_timed_in_turn_follows_the_same_floor_rule():
    """Timed in turn (bench_turn.py), a compiled slot below the reference algorithm's
    compute floor but above the memory floor is shown with a review, as beside the gate's
    slots; it was dropped there as "below the floor" (the old rule, noticed 2026-12-07).
    Below the memory floor it is still not a number to show."""
    from types import SimpleNamespace

    from kernelloop.evaluate.protocol import COMPILED
    from kernelloop.evaluate.trusted.bench_turn import _fill
    from tests.bench.records import SHAPES, record

    def turn(compiled_ms: float, floors: dict):
        rec = record({label: 1.0 for label, _, _ in SHAPES})
        rec.shapes = rec.shapes[:1]
        rec.shapes[0].floor_ms = 0.9  # the reference algorithm's compute floor
        got = {"256x1024": {"baseline": _slot(1.0), COMPILED: _slot(compiled_ms)}}
        return rec, _fill(rec, SimpleNamespace(shapes=got), floors)

    rec, why = turn(0.3, {"256x1024": (0.1, "")})
    assert why == "" and rec.shapes[0].compiled_in_turn.compiled_ms == 0.3, rec.warnings
    assert any("algebraic rewrite" in w and "(timed in turn)" in w for w in rec.warnings)
    rec, why = turn(0.3, {})  # no memory floor known: the compute floor bounds it
    assert "no usable timing on 256x1024" in why and rec.shapes[0].compiled_in_turn is None
    rec, why = turn(0.05, {"256x1024": (0.1, "")})  # below the memory floor: impossible
    assert "no usable timing on 256x1024" in why and rec.shapes[0].compiled_in_turn is None
