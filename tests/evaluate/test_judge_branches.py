"""The trusted side never raises (issue 33, item 4): whatever bytes a candidate writes, judging
one call ends in a pass or in a failure with a category — over a single output (p = 0), a
stochastic call (p > 0: kept and dropped references) and a tuple of outputs — and every
failure branch of the judge is reached here, without a worker. The trusted side's own
failure is `internal` (infrastructure: the loop evaluates again), one sentence, with its
traceback only in this process's log."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.values import judge as judge_module
from kernelloop.evaluate.trusted.values import judge_stochastic
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import plan_calls
from kernelloop.task import load_task
from tests.conftest import FLAGSHIP
from tests.evaluate import channel_cases as cc

ADD_RMSNORM = Path(__file__).resolve().parents[2] / "examples" / "add_rmsnorm"
# What a candidate's values can be charged with; never protocol (the bytes were read),
# setup (the task's fault) or internal (the trusted side's) — those have their own tests.
VALUE = {"wrong", "nonfinite", "trivial", "stochastic", "nondeterministic"}
_dirs = itertools.count()


@pytest.fixture(scope="module")
def tasks():
    return {"flagship": load_task(FLAGSHIP), "tuple": load_task(ADD_RMSNORM)}


def _call(task, kind: str, dtype: str):
    """A planned call of `kind`: p0 (one output, exact), p>0 (kept/dropped references,
    the random suite), tuple (several outputs)."""
    shape = task.shapes_for("cpu")[-1] if kind == "tuple" else task.find_shape("7x129")
    plan = plan_calls(task, [shape], [dtype], unseen=False)
    want = {"p0": ("stochastic", 0.0), "p>0": ("random", 0.1), "tuple": ("random", 0.0)}[kind]
    return next(c for c in plan.calls if (c.suite, c.rate) == want and c.case == "random")


def _message(judge: Judge, call, **changes) -> dict:
    like = judge.output_like(call)
    parts = judge.output_parts(call)
    msg = cc.call_tensor(
        call.id, shape=tuple(like.shape), dtype=str(like.dtype).removeprefix("torch.")
    )
    if len(parts) > 1:
        msg["out_type"] = "builtins.tuple"
        msg["out_parts"] = [
            {
                "shape": list(p.shape),
                "dtype": str(p.dtype).removeprefix("torch."),
                "device": "cpu",
                "contiguous": True,
            }
            for p in parts
        ]
    return {**msg, **changes}


def _judge(
    judge: Judge, call, payload: torch.Tensor | bytes, tmp: Path, msg: dict | None = None, **changes
) -> list:
    """Judge one call whose output bytes are `payload` (its message `msg`, default the one
    an honest worker sends, with `changes`); the failures it added."""
    out = tmp / f"out{next(_dirs)}"
    out.mkdir()
    raw = (
        payload
        if isinstance(payload, bytes)
        else payload.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    )
    (out / f"{call.id}.bin").write_bytes(raw)
    before = len(judge.failures)
    with OutputDir(out) as outputs:
        judge.judge(call, msg or _message(judge, call, **changes), outputs)
    return judge.failures[before:]


def _exact(judge: Judge, call, mask_seed: int = 0, rate: float | None = None) -> torch.Tensor:
    """An honest output's bytes: the float64 reference(s) rounded once; with p > 0, a
    fresh Bernoulli mask at `rate` (default: the call's)."""
    refs = judge.value_refs(call)
    like = judge.output_like(call)
    if "keep" in refs:
        g = torch.Generator().manual_seed(mask_seed)
        p = call.rate if rate is None else rate
        dropped = torch.rand(like.shape, generator=g) < p
        return torch.where(dropped, refs["drop"], refs["keep"]).to(like.dtype)
    if "ref" in refs:
        return refs["ref"].to(like.dtype)
    parts = [refs[f"ref.{k}"].to(p.dtype) for k, p in enumerate(judge.output_parts(call))]
    return torch.cat([p.reshape(-1).view(torch.uint8) for p in parts])


KINDS = ["p0", "p>0", "tuple"]
DTYPES = ["bfloat16", "float16", "float32"]
MUTATIONS = [
    "exact",
    "noise",
    "zeros",
    "nan",
    "inf",
    "bytes",
    "scale",
    "wrong_rate",
    "shared_rows",
    "uniform",
]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(KINDS),
    dtype=st.sampled_from(DTYPES),
    mutation=st.sampled_from(MUTATIONS),
    seed=st.integers(0, 2**31 - 1),
    size=st.sampled_from([1e-6, 1e-3, 1.0, 1e4]),
)
def test_any_output_is_judged_without_raising(tasks, tmp_path, kind, dtype, mutation, seed, size):
    task = tasks["tuple" if kind == "tuple" else "flagship"]
    judge = Judge(task, "cpu")
    call = _call(task, kind, dtype)
    good = _exact(judge, call, seed)
    g = torch.Generator().manual_seed(seed)
    like = judge.output_like(call)
    flat = good.view(like.dtype) if kind != "tuple" else good
    if mutation == "exact":
        out = good
    elif mutation == "bytes":
        out = torch.randint(0, 256, (good.numel() * good.element_size(),), generator=g)
        out = out.to(torch.uint8).view(good.dtype).reshape(good.shape)
    elif kind == "tuple":  # the packed bytes: perturb them as float32/bf16 words
        words = good.clone().view(torch.uint8)
        k = int(torch.randint(0, words.numel(), (1,), generator=g))
        words[k] ^= 0x40
        out = words
    elif mutation == "noise":
        noise = size * torch.randn(flat.shape, generator=g, dtype=torch.float64)
        out = (flat.double() + noise).to(flat.dtype)
    elif mutation == "zeros":
        out = torch.zeros_like(flat)
    elif mutation in ("nan", "inf"):
        out = flat.clone()
        out.view(-1)[seed % out.numel()] = float(mutation)
    elif mutation == "scale":
        out = (flat.double() * (1 + size)).to(flat.dtype)
    elif mutation == "uniform":
        inputs = judge._inputs(call)
        out = (inputs["residual"].double() + 1.0 / flat.shape[-1]).to(flat.dtype)
    elif mutation == "wrong_rate":
        out = _exact(judge, call, seed, rate=min(0.5, 3 * max(call.rate, 0.1)))
    else:  # shared_rows: the first row's mask (or values) for every row
        refs = judge.value_refs(call)
        first = torch.rand(flat.shape[-1], generator=g) < max(call.rate, 0.1)
        if "keep" in refs:
            out = torch.where(first.expand(flat.shape), refs["drop"], refs["keep"]).to(flat.dtype)
        else:
            out = flat[:1].expand(flat.shape).contiguous()
    failures = _judge(judge, call, out, tmp_path)
    if mutation == "exact":
        assert failures == [], [f.reason for f in failures]
    assert {f.category for f in failures} <= VALUE, [(f.category, f.reason) for f in failures]
    assert all(isinstance(f.reason, str) and "\n" not in f.reason for f in failures)
    if mutation in ("zeros", "nan", "inf", "uniform", "wrong_rate") and kind == "p>0":
        assert failures, mutation  # each of these is wrong on a 7x129 p > 0 call


def test_every_value_branch_names_its_category(tasks, tmp_path):
    flagship = tasks["flagship"]
    seen = {}

    def judged(kind, dtype, payload_of, **changes):
        judge = Judge(flagship, "cpu")
        call = _call(flagship, kind, dtype)
        got = _judge(judge, call, payload_of(judge, call), tmp_path, **changes)
        for f in got:
            seen.setdefault(f.category, f.reason)
        return got

    like = lambda j, c: j.output_like(c)  # noqa: E731
    # wrong (p = 0), nonfinite, trivial (the residual passed through)
    judged("p0", "float32", lambda j, c: (_exact(j, c).double() + 1e-2).float())
    judged("p0", "float32", lambda j, c: torch.full_like(like(j, c), float("nan")))
    judged("p>0", "float32", lambda j, c: j._inputs(c)["residual"].clone())
    # stochastic: twice the rate, its reason saying so, and never KeyError('ref.0')
    got = judged("p>0", "float32", lambda j, c: _exact(j, c, 1, rate=0.3))
    assert got[0].category == "stochastic" and "dropped fraction" in got[0].reason
    # interface, aliasing, mutation: from the worker's facts
    judged("p0", "float32", _exact, out_shape=[1, 2])
    judged("p0", "float32", _exact, aliases=["residual"])
    judged("p0", "float32", _exact, mutated=["x"])
    # crash and compile: the candidate's call raised
    judged("p0", "float32", _exact, ok=False, error="Traceback\nValueError: boom")
    assert {"wrong", "nonfinite", "trivial", "stochastic", "interface", "aliasing"} <= set(seen)
    assert {"mutation", "crash"} <= set(seen), seen


def test_a_determinism_pair_at_p_above_0_with_two_masks_is_nondeterministic(tasks, tmp_path):
    flagship = tasks["flagship"]
    judge = Judge(flagship, "cpu")
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"], unseen=False)
    det = {c.role: c for c in plan.calls if c.suite == "determinism"}
    a, b = det["a"], det["repeat"]  # the same inputs and seed (refill: new values between)
    assert a.rate == b.rate == 0.1 and a.params == b.params  # the op as it is used
    assert _judge(judge, a, _exact(judge, a, 1), tmp_path) == []
    (f,) = _judge(judge, b, _exact(judge, b, 2), tmp_path)
    assert f.category == "nondeterministic" and "same inputs and seed" in f.reason


def test_the_task_at_fault_is_setup(tasks, tmp_path, monkeypatch):
    judge = Judge(tasks["flagship"], "cpu")
    call = _call(tasks["flagship"], "p>0", "float32")
    good, msg = _exact(judge, call), _message(judge, call)

    def broken(*_a, **_k):
        raise ZeroDivisionError("the task's generator")

    monkeypatch.setattr(judge, "make_inputs", broken)
    (f,) = _judge(judge, call, good, tmp_path, msg)
    assert f.category == "setup" and "the task is at fault" in f.reason


@pytest.mark.parametrize("kind", KINDS)
def test_a_trusted_side_failure_is_internal_never_raised(tasks, tmp_path, monkeypatch, capfd, kind):
    task = tasks["tuple" if kind == "tuple" else "flagship"]
    judge = Judge(task, "cpu")
    call = _call(task, kind, "float32")
    good = _exact(judge, call)

    def bug(*_a, **_k):
        raise KeyError("ref.0")  # what a stochastic call once met in _fail_values

    # the comparison itself breaks, on whichever path this call takes
    monkeypatch.setattr(judge_stochastic, "infer_mask", bug)
    monkeypatch.setattr(judge_module, "within_tolerance", bug)
    (f,) = _judge(judge, call, good, tmp_path)
    assert f.category == "internal"
    assert (
        f.reason.count(".") <= 2
        and "\n" not in f.reason
        and "not the candidate's fault" in (f.reason)
    )
    assert "Traceback" in capfd.readouterr().err  # the log has it; the verdict does not


def test_an_unreadable_output_is_still_the_callers_protocol_error(tasks, tmp_path):
    judge = Judge(tasks["flagship"], "cpu")
    call = _call(tasks["flagship"], "p0", "float32")
    with pytest.raises(OutputError):
        _judge(judge, call, b"\0" * 7, tmp_path)  # short: the reader's protocol violation
