"""The end-to-end check (`[e2e]`, docs/task.md "End-to-end equivalence"), with real
sandboxed workers on the CPU task (plain PyTorch: fast) and the trusted side's reading of
an e2e output through the real channel and out dir."""

from __future__ import annotations

import threading
from pathlib import Path

from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.run import _consume, evaluate
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import plan_calls
from kernelloop.task import load_task
from tests.evaluate import channel_cases as cc
from tests.evaluate.test_channel_fuzz import Lines

ROOT = Path(__file__).resolve().parents[2]
CPU_TASK = ROOT / "examples" / "cpu_task"
BIASED = Path(__file__).parent / "e2e_candidates" / "biased.py"
# One shape keeps the per-op suites short; the e2e model runs on its own shape.
ONE = {"device": "cpu", "shapes": "256x1024", "timing": False, "workers": 1}


def test_a_bias_inside_the_per_op_tolerance_passes_every_op_check_and_fails_e2e():
    task = load_task(CPU_TASK)
    rec = evaluate(task, BIASED, **ONE)
    assert rec.verdict.category == "e2e", rec.verdict.reasons
    assert rec.verdict.reasons[0].startswith("e2e/model 64x64 float32: the [e2e] model")
    per_op = [c for c in rec.checks if c.suite != "e2e"]
    assert per_op and all(c.passed for c in per_op)
    # the bias is really there, inside the per-op rtol (1e-4) on every call
    assert all(4e-5 < c.max_rel_err < 1e-4 for c in per_op if c.suite == "random")
    (e2e,) = [c for c in rec.checks if c.suite == "e2e"]
    assert not e2e.passed and e2e.max_abs_err > 10 * task.spec.e2e.tolerances["float32"].atol
    stages = {s.name: s.status for s in rec.stages}
    assert stages["full"] == "passed" and stages["e2e"] == "failed"


def test_the_honest_baseline_passes_e2e_and_the_record_shows_it():
    task = load_task(CPU_TASK)
    rec = evaluate(task, task.baseline_path, **ONE)
    assert rec.verdict.accepted, rec.verdict.reasons
    (e2e,) = [c for c in rec.checks if c.suite == "e2e"]
    assert e2e.passed and e2e.shape == "64x64" and e2e.max_abs_err < 1e-5
    assert {s.name: s.status for s in rec.stages}["e2e"] == "passed"
    assert rec.suites_passed()["e2e"]


def test_e2e_calls_come_last_with_dropout_off():
    task = load_task(ROOT / "examples" / "ln_softmax_dropout")
    plan = plan_calls(task, task.shapes_for("cpu"), ["float32"], e2e_shapes=task.e2e_shapes("cpu"))
    e2e = [c for c in plan.calls if c.suite == "e2e"]
    assert [c.stage for c in plan.calls[-len(e2e) :]] == ["e2e"]
    assert e2e[0].params["p"] == 0.0 and not e2e[0].audit and e2e[0].to_job()["e2e"]
    assert not [c for c in plan_calls(task, task.shapes_for("cpu"), ["float32"]).calls
                if c.suite == "e2e"]  # fmt: skip


def test_a_malformed_e2e_output_is_a_protocol_rejection(tmp_path):
    task = load_task(CPU_TASK)
    plan = plan_calls(task, [], ["float32"], e2e_shapes=task.e2e_shapes("cpu"))
    (call,) = plan.calls
    judge, key = Judge(task, "cpu"), channel.new_key()
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{call.id}.bin").write_bytes(b"\0" * (64 * 64 * 4 - 1))  # one byte short
    msg = cc.call_tensor(call.id, shape=(64, 64))
    done = {}

    def go():
        with OutputDir(out) as outputs:
            lines = Lines([cc.encode(cc.hello(), key), cc.encode(msg, key)])
            done["state"] = _consume(lines, plan, judge, outputs, lambda _m: None, key, 100)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive()
    assert done["state"]["protocol"].startswith(f"{call.id}: "), done["state"]["protocol"]
    assert [f.category for f in judge.failures] == ["protocol"]
    assert not list(out.iterdir())
