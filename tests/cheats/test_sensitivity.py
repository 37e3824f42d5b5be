"""The trusted side's proof that trivial outputs fail a planned check (no worker needed)."""

import re
import shutil

import pytest
import torch

from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import plan_calls
from kernelloop.evaluate.trusted.values.sensitivity import trivial_outputs
from kernelloop.task import load_task
from tests.conftest import FLAGSHIP


def _prove(task, shapes: str, dtype: str) -> Judge:
    """Run every planned call's check on the trivial outputs, as `Judge.judge` does."""
    judge = Judge(task, "cpu")
    plan = plan_calls(task, [task.find_shape(s) for s in shapes.split(",")], [dtype])
    for call in plan.calls:
        inputs = judge._inputs(call)
        like = inputs[task.spec.task.output_like]
        refs = judge.value_refs(call, inputs)  # {"keep", "drop"} for any call with p > 0
        trivial = trivial_outputs(inputs, like, refs.get("ref", refs.get("keep")), refs.get("keep"))
        judge._prove(call, trivial, refs, task.spec.tolerances[dtype])
    judge.finish_sensitivity()
    return judge


def test_flagship_plan_rejects_every_trivial_output(flagship):
    judge = _prove(flagship, "5x1000", "bfloat16")
    assert judge.failures == []
    cases = {c.case for c in judge.checks if c.suite == "sensitivity" and c.passed}
    assert cases == {
        "zeros",
        "constant",
        "pass-through of x",
        "pass-through of residual",
        "no dropout (every element kept)",
    }


def test_loose_task_is_refused_as_unproven(tmp_path):
    # atol 1 and no stochastic case: out = residual + softmax (<= 1), so the residual alone passes
    # everywhere, whatever weights are drawn (at atol 0.5 a peaked softmax row could reject it).
    folder = tmp_path / "loose"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    toml = (folder / "task.toml").read_text()
    toml = re.sub(r"\[stochastic\].*?\n\n", "", toml, flags=re.S).replace(
        "p = 0.1", "p = 0.0\nseed = 0"
    )
    toml = re.sub(
        r"(bfloat16|float16|float32) = \{ atol = [^}]*\}", r"\1 = { atol = 1.0, rtol = 0.5 }", toml
    )
    toml = re.sub(r"extreme = \[[^\]]*\]", "extreme = []", toml)
    toml = re.sub(r"at_params = \[[^\]]*\]\n", "", toml)  # no extreme case to name
    (folder / "task.toml").write_text(toml)
    judge = _prove(load_task(folder), "7x129", "float32")
    assert judge.failures and {f.category for f in judge.failures} == {"setup"}
    assert any("pass-through of residual" in f.reason for f in judge.failures)
    assert all("tighten the task's tolerances" in f.reason for f in judge.failures)


def test_trivial_outputs_are_named_at_once_and_made_only_when_looked_at():
    x = torch.randn(4, 6, dtype=torch.float64)
    like = torch.empty(4, 6, dtype=torch.bfloat16)
    ref = torch.tensor([[1.0, float("nan")], [3.0, 5.0]], dtype=torch.float64).repeat(2, 3)
    inputs = {"x": x, "w": torch.ones(6), "eps": 1e-5}
    # Named without any tensor made: a reference that cannot be read is never read.
    lazy = trivial_outputs(inputs, like, ref=None)
    assert list(lazy) == ["zeros", "constant", "pass-through of x"] and len(lazy) == 3
    assert torch.equal(lazy["zeros"], torch.zeros_like(like))
    assert torch.equal(lazy["pass-through of x"], x.to(torch.bfloat16))
    try:
        lazy["constant"]
    except (TypeError, AttributeError):
        pass
    else:
        raise AssertionError("the constant was made from a reference that is not there")
    # Made when looked at: the finite reference's mean, in the output's dtype, once.
    made = trivial_outputs(inputs, like, ref)
    assert torch.equal(made["constant"], torch.full_like(like, 3.0))
    assert made["constant"] is made["constant"]
    assert "pass-through of w" not in made and dict(made).keys() == set(lazy)


def test_the_constant_trivial_output_is_the_finite_mean_taken_in_chunks(monkeypatch):
    """The best constant is the mean of the reference's finite values, computed a chunk at
    a time (a whole-tensor boolean index ran the H200's trusted side out of memory)."""
    from kernelloop.evaluate.trusted.values import sensitivity

    monkeypatch.setattr(sensitivity, "CHUNK", 7)  # several chunks, the last one short
    ref = torch.linspace(-3.0, 5.0, 50, dtype=torch.float64).reshape(5, 10)
    ref[1, 2], ref[3, 4], ref[4, 9] = float("inf"), float("nan"), float("-inf")
    finite = ref[torch.isfinite(ref)]
    assert sensitivity.finite_mean(ref) == pytest.approx(float(finite.mean()), rel=1e-12)
    assert sensitivity.finite_mean(torch.full((4,), float("nan"))) == 0.0
    like = torch.empty(5, 10, dtype=torch.float16)
    const = sensitivity.trivial_outputs({}, like, ref)["constant"]
    assert const.dtype == torch.float16 and torch.all(const == float(finite.mean().half()))
