"""`evaluate` end to end with real sandboxed worker processes on the CPU (Triton interpreter)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.values.plan import plan_calls
from tests.conftest import FLAGSHIP, FUSED

CHEATS = Path(__file__).parent / "cheats"
# screen=False: these cheats test the sandbox itself; the static screen (tests/cheats) would
# refuse them first.
ONE = {"device": "cpu", "shapes": "5x1000", "dtypes": ["float32"], "timing": False, "screen": False}


def test_fused_candidate_accepted_with_every_suite_passed(flagship):
    rec = evaluate(
        flagship,
        FUSED,
        device="cpu",
        shapes="5x1000,7x129",
        dtypes=["bfloat16", "float32"],
        timing=False,
    )
    assert rec.verdict.accepted, rec.verdict.reasons
    suites = rec.suites_passed()
    assert set(suites) == {
        "random",
        "extreme",
        "stochastic",
        "interface",
        "determinism",
        "sensitivity",
        "e2e",
    }
    assert all(suites.values())
    assert rec.environment.sandbox in {"bwrap", "unshare"}
    assert rec.kernel_launches_per_call == 1
    cases = {c.case for c in rec.checks if c.suite == "extreme"}
    assert cases == set(flagship.spec.suites.extreme)


def test_wrong_candidate_names_shape_dtype_and_error(flagship):
    rec = evaluate(flagship, CHEATS / "wrong_scale.py", **ONE)
    assert not rec.verdict.accepted
    assert rec.verdict.category == "wrong"
    # at p = 0 outside the tolerance; at p > 0 (the random suite) neither kept nor dropped
    values = ("outside atol", "neither a kept nor a dropped value")
    assert any("5x1000 float32" in r and any(v in r for v in values) for r in rec.verdict.reasons)


def test_hanging_candidate_killed_within_timeout(flagship):
    rec = evaluate(flagship, CHEATS / "hang.py", timeout_s=8, **ONE)
    assert rec.verdict.category == "timeout"
    assert rec.wall_s < 30


@pytest.mark.parametrize("cheat", ["exit_early.py", "segfault.py"])
def test_crashing_candidate_rejected(flagship, cheat):
    rec = evaluate(flagship, CHEATS / cheat, **ONE)
    assert not rec.verdict.accepted
    assert rec.verdict.category == "crash"
    assert any(
        "produced no result" in r or "exit code" in r or "protocol" in r
        for r in rec.verdict.reasons
    )


def test_writing_into_task_folder_leaves_it_unchanged(flagship):
    before = {p: p.read_bytes() for p in FLAGSHIP.rglob("*.py")}
    rec = evaluate(flagship, CHEATS / "write_task.py", timeout_s=120, **ONE)
    assert not rec.verdict.accepted
    assert {p: p.read_bytes() for p in FLAGSHIP.rglob("*.py")} == before


def test_environment_secrets_absent_from_worker_and_reports(flagship, secret_env):
    rec = evaluate(flagship, CHEATS / "read_env.py", **ONE)
    assert not rec.verdict.accepted
    dumped = rec.model_dump_json()
    assert secret_env not in dumped
    assert "no-key-found" in rec.worker_log_tail  # the worker really looked and found nothing


def test_network_is_unreachable(flagship):
    rec = evaluate(flagship, CHEATS / "network.py", **ONE)
    assert rec.verdict.category == "crash"
    assert not any("the network was reachable" in r for r in rec.verdict.reasons)
    assert (
        "OSError" in rec.worker_log_tail or "unreachable" in " ".join(rec.verdict.reasons).lower()
    )


def test_cli_evaluate_json_and_exit_codes(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "kernelloop.cli",
        "evaluate",
        str(FLAGSHIP),
        str(FUSED),
        "--json",
        "--device",
        "cpu",
        "--shapes",
        "7x129",
        "--dtypes",
        "float16",
        "--no-timing",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    record = json.loads(res.stdout)
    assert record["verdict"]["accepted"] is True
    bad = subprocess.run(
        cmd[:5] + [str(CHEATS / "wrong_scale.py")] + cmd[6:],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 1
    usage = subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "evaluate", str(tmp_path), str(FUSED)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2
    assert "no task.toml" in usage.stderr


@pytest.mark.gpu
def test_fused_accepted_on_gpu(flagship):
    rec = evaluate(
        flagship, FUSED, device="cuda", shapes="4096x8000,1024x32768", dtypes=["bfloat16"]
    )
    assert rec.verdict.accepted, rec.verdict.reasons
    assert rec.timings_count
    assert {t.impl for t in rec.timings} == {"candidate", "baseline"}


def test_extreme_suite_covers_every_task_dtype_even_when_fewer_are_selected(flagship):
    # One-pass variance is invisible in bf16 (the input cannot carry a large mean/std
    # ratio) but fails fp32 large_offset: a bf16-only evaluation must still reject it.
    fragile = FLAGSHIP / "scripted" / "03_one_pass_variance.py"
    rec = evaluate(
        flagship, fragile, device="cpu", shapes="7x129", dtypes=["bfloat16"], timing=False
    )
    assert rec.verdict.category == "wrong", rec.verdict.reasons
    # rejected by an extreme case in a dtype that was not selected (the evaluation stops
    # at that first failure, so which of fp16/fp32 fails first is the plan's order)
    assert any(
        "large_offset" in r and ("float32" in r or "float16" in r) for r in rec.verdict.reasons
    )
    assert "bfloat16" not in rec.verdict.reasons[0]
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["bfloat16"])
    assert {c.dtype for c in plan.calls if c.suite == "extreme"} == set(flagship.spec.dtypes)


def test_a_failing_candidate_is_stopped_at_its_first_failed_check_and_never_timed(flagship):
    # One-pass variance passes random inputs (compile) and fails an extreme case, which
    # the smoke stage runs first on the smallest shape: the workers are stopped there,
    # the rest of the plan never runs, and even with timing asked for, a rejected
    # candidate is never timed.
    fragile = FLAGSHIP / "scripted" / "03_one_pass_variance.py"
    rec = evaluate(
        flagship, fragile, device="cpu", shapes="5x1000,7x129", dtypes=["float32"], timing=True
    )
    assert rec.verdict.category == "wrong", rec.verdict.reasons
    # each worker stops at its own first failure (the other may have been past the first)
    assert len(rec.failed_checks()) <= 2
    assert rec.verdict.reasons[0].startswith("extreme/large_offset 5x129 float32")
    assert not any("produced no result" in r or "exit code" in r for r in rec.verdict.reasons)
    stages = {s.name: s for s in rec.stages}
    assert [s.name for s in rec.stages] == [
        "static",
        "start",
        "compile",
        "smoke",
        "full",
        "e2e",
        "timing",
    ]
    assert stages["compile"].status == "passed" and stages["smoke"].status == "failed"
    assert stages["full"].status == stages["e2e"].status == stages["timing"].status == "not run"
    assert rec.timings == []
    planned = sum(s.calls for s in rec.stages)
    assert planned < 40  # of the 40+ planned calls, it stopped after the first failure
    assert all(s.seconds >= 0 for s in rec.stages)


def test_timing_is_skipped_under_the_interpreter_unless_asked_for(flagship):
    rec = evaluate(flagship, FUSED, device="cpu", shapes="7x129", dtypes=["float32"])
    assert rec.verdict.accepted, rec.verdict.reasons
    assert not rec.timings_count and rec.timings == []
    assert [(s.name, s.status) for s in rec.stages][-1] == ("timing", "skipped")
    assert all(s.status == "passed" for s in rec.stages[:-1])
