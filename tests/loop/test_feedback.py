"""What the agent is told after each candidate (issue 16): the first failing check with
its case, shape, dtype and worst element; the per-shape ratios of a measured one; and a
digest whose labels do not contradict each other."""

from __future__ import annotations

from kernelloop.evaluate.trusted.values.record import (
    CheckResult,
    Environment,
    EvaluationRecord,
    KernelInfo,
    Verdict,
)
from kernelloop.gate import GateResult, ShapeGate
from kernelloop.history.models import Attempt
from kernelloop.loop.feedback import outcome_text
from kernelloop.loop.state import Evaluated

FIRST = (
    "extreme/large_weight 7x129 float32: 3 of 903 elements outside atol=2e-05, rtol=0.005 "
    "(max abs err 0.011, worst at [4, 17]: expected 0.0213, got 0.0101)"
)


def record(accepted: bool, category: str, reasons: list[str], checks=()) -> EvaluationRecord:
    env = Environment(device="cpu", device_name="x86_64", torch="2", python="3.12", sandbox="bwrap")
    return EvaluationRecord(
        task="t", task_digest="d", candidate="c.py", candidate_sha256="0" * 64,
        started_at="now", wall_s=1.0, environment=env, checks=list(checks),
        verdict=Verdict(accepted=accepted, category=category, reasons=reasons),
    )  # fmt: skip


def check(passed: bool, case: str = "random") -> CheckResult:
    return CheckResult(suite="extreme", case=case, shape="7x129", dtype="float32", passed=passed)


def test_a_wrong_candidate_hears_the_first_failing_check_with_its_worst_element():
    reasons = [FIRST, "extreme/large_weight 7x129 bfloat16: 1 of 903 elements outside"]
    rec = record(False, "wrong", reasons, [check(True), check(False), check(False)])
    text = outcome_text("rejected [wrong]", reasons, Evaluated(rec), "#3")
    first, *rest = text.splitlines()
    assert first == f"rejected [wrong]: first failing check: {FIRST}"  # word: the outcome
    assert "2 of the 3 checks that ran failed." in rest and f"also: {reasons[1]}" in rest
    assert text.startswith("rejected")  # the tuner reads the first word


def test_the_stages_that_never_ran_are_named_beside_the_failed_count():
    """Issue 47: "2 of 11 checks failed" read as the whole suite when smoke, full and e2e
    never ran (the evaluation stops at its first failing stage)."""
    from kernelloop.evaluate.trusted.values.record import StageTime

    reasons = [FIRST]
    rec = record(False, "wrong", reasons, [check(True), check(False)])
    rec.stages = [
        StageTime(name="static"),
        StageTime(name="start"),
        StageTime(name="compile", status="failed"),
        StageTime(name="smoke", status="not run"),
        StageTime(name="full", status="not run"),
        StageTime(name="e2e", status="not run"),
    ]
    text = outcome_text("rejected [wrong]", reasons, Evaluated(rec), "#3")
    assert "1 of the 2 checks that ran failed. Never ran: smoke, full, e2e" in text, text


def test_a_slower_candidate_hears_its_ratio_on_every_shape():
    gate = GateResult(
        accepted=False, category="slower", objective=0.9871, required_gain=0.005,
        reasons=["weighted geomean speedup 0.9871x over the best does not beat the required "
                 "1.0050x (max(min_gain 0.5%, 3 x noise 0.10%))"],
        shapes=[ShapeGate(shape="16384x8192", tag="common", weight=0.35, speedup_vs_best=0.97),
                ShapeGate(shape="1024x32768", tag="long_tail", weight=0.05, speedup_vs_best=1.04)],
    )  # fmt: skip
    rec = record(True, "accepted", [])
    rec.kernels = [
        KernelInfo(
            name="_fused",
            n_regs=96,
            n_spills=4,
            shared_bytes=0,
            num_warps=8,
            specialization="pointers bf16, BLOCK_COLS=8192",
            convert_layouts=2,
        )
    ]
    text = outcome_text("rejected", gate.reasons, Evaluated(rec, gate=gate), "#5")
    # Its own compile facts, labelled by what it was specialized for.
    assert "Kernel _fused [pointers bf16, BLOCK_COLS=8192]: 96 registers/thread, 4 spills" in text
    assert "2 layout conversions (TTGIR convert_layout)" in text
    assert "per shape vs the best #5 (>1 = faster): 16384x8192 0.970x, 1024x32768 1.040x" in text
    assert "weighted geomean vs the best: 0.9871x (needed > 1.0050x)" in text
    assert text.startswith("rejected: weighted geomean speedup 0.9871x")  # as given


def attempt(**kw) -> Attempt:
    base = dict(id=2, run_id=1, round=1, k=1, parent_id=1, agent="llm", model="m",
                direction="", hypothesis="fuse", predicted_effect="", attribution="",
                diff_summary="", edit_points=1, status="evaluated", refused_reason="",
                commit_sha="", branch="", source="")  # fmt: skip
    return Attempt(**{**base, **kw})


def test_a_correct_but_unmeasured_attempt_is_not_called_accepted():
    a = attempt(accepted=True, category="accepted", objective=None)
    assert a.verdict_label == a.outcome == "judged correct, not timed"
    assert a.headline().startswith("#2 r1 judged correct, not timed")
    assert "accepted" not in a.format_for_prompt(compact=True)
    measured = attempt(accepted=True, category="accepted", objective=1.2, parent_objective=1.0)
    assert measured.outcome == "judged correct, not promoted"  # not the best
    assert attempt(accepted=True, objective=1.2, was_best=True).outcome == "promoted"
