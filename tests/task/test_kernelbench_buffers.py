"""Issue 46 item 1: a published KernelBench solution (`class ModelNew`) whose model keeps a
registered buffer (minGPT's causal mask, a BatchNorm's statistics) is judged on its own
ops. The harness hands the task's parameters and buffers to the model — buffers copied, so
a BatchNorm in training mode cannot change the call's inputs — and that copying is the
harness's, done before the checked call: it was read as the candidate "calling PyTorch
compute ops [clone, copy_]" and the solution was rejected (H100, 2026-12-07, level3/43)."""

from __future__ import annotations

from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem

HERE = Path(__file__).parent / "fixtures" / "kernelbench_buffers"


def _task(tmp_path):
    return load_task(import_problem(HERE / "causal_mask.py", tmp_path, ["float32"]))


def test_a_modelnew_with_a_registered_buffer_is_judged_on_its_own_ops(tmp_path):
    task = _task(tmp_path)
    rec = evaluate(task, HERE / "causal_mask_solution.py", device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons


def test_the_buffer_still_reaches_the_model_and_a_wrong_use_of_it_is_rejected(tmp_path):
    # The same solution reading the mask's transpose (the upper triangle): wrong wherever
    # the mask matters, so the buffer handed over is the task's, not the model's own copy.
    task = _task(tmp_path)
    bad = tmp_path / "upper.py"
    text = (HERE / "causal_mask_solution.py").read_text()
    old = "m = tl.load(m_ptr + i * n + offs, mask=ok, other=0.0)"
    assert old in text
    bad.write_text(text.replace(old, "m = tl.load(m_ptr + offs * n + i, mask=ok, other=0.0)"))
    rec = evaluate(task, bad, device="cpu", timing=False)
    assert not rec.verdict.accepted and rec.verdict.category == "wrong", rec.verdict.reasons


def test_a_modelnew_answer_is_profiled_like_a_function(tmp_path):
    """The profile worker finds the entry as the evaluation's worker does: a ModelNew
    answer once failed to profile ("has no attribute 'forward'"), so the loop fed its
    model no compile facts for it."""
    from kernelloop.profile.run import profile_candidate

    out = profile_candidate(_task(tmp_path), HERE / "causal_mask_solution.py", device="cpu",
                            timeout_s=120)  # fmt: skip
    facts = out.report.compile_facts
    assert [f.name for f in facts] == ["_masked_double"] and facts[0].arch == "sm_90", facts
