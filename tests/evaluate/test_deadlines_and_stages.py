"""Issue 47 items 6-7 and issue 45 class 7, through real sandboxed evaluations on the CPU:
a hanging candidate is a `timeout` within 30 s at the stage it hung in (a per-call deadline,
values/deadline.py), never a compile failure; a runtime error whose text imitates a compiler
error is a `crash`, never `compile`; the stage line names the check that failed and the
stages that never ran. The red team (stage_redteam/) is pure Triton over the flagship, each
shown wrong here by running it outside kernelloop first."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.values import deadline
from kernelloop.evaluate.trusted.values.stages import summary

RED = Path(__file__).parent / "stage_redteam"
ONE = {"device": "cpu", "shapes": "7x129", "dtypes": ["float32"], "timing": False}
# One worker: its first call is the compile stage. With two, the second worker's first call
# (a smoke-stage call) can be the one seen overdue first on a loaded machine (CI, 2026-12-07).
ONE_LANE = {**ONE, "workers": 1}


def _direct(name: str, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """`forward` of red-team file `name` called outside kernelloop, under its own name."""
    code = (
        "import importlib.util, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location({Path(name).stem!r}, {str(RED / name)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "g = torch.Generator().manual_seed(0)\n"
        "x, r = torch.randn(7, 129, generator=g), torch.randn(7, 129, generator=g)\n"
        "w, b = torch.randn(129, generator=g), torch.randn(129, generator=g)\n"
        "out = m.forward(x, r, w, b, p=0.0, eps=1e-5, seed=1)\n"
        "ref = r + torch.softmax(torch.nn.functional.layer_norm(x, (129,), w, b, 1e-5), -1)\n"
        "err = (out - ref).abs().max() if out.shape == ref.shape else -1\n"
        "print(tuple(out.shape), float(err))\n"
    )
    env = {"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_the_red_team_is_wrong_outside_kernelloop():
    with pytest.raises(subprocess.TimeoutExpired):
        _direct("hang_in_forward.py", timeout=5)
    out = _direct("fake_compile_error.py")
    assert out.returncode == 1 and "RuntimeError: lookup failed" in out.stderr, out.stderr
    assert _direct("wrong_shape.py").stdout.startswith("(7, 128) -1")
    shape, err = _direct("wrong_values.py").stdout.rsplit(" ", 1)  # (7, 129) 0.8
    assert shape == "(7, 129)" and float(err) > 0.1


def test_a_hanging_candidate_is_a_timeout_within_30_s_at_its_stage(flagship):
    """No `--timeout`: the task's 600 s evaluation budget and 300 s compile budget stand;
    the call's own deadline ends it (it hung in its first call: the compile stage)."""
    load = deadline.load_factor()  # a loaded machine interprets slower: the deadline grows
    t = time.monotonic()
    rec = evaluate(flagship, RED / "hang_in_forward.py", **ONE_LANE)
    wall = time.monotonic() - t
    assert rec.verdict.category == "timeout", rec.verdict.reasons
    print(f"hang: timeout after {wall:.1f} s wall (load factor {load:.2f})")
    assert wall <= 30 * max(load, deadline.load_factor()), wall
    first = rec.verdict.reasons[0]
    assert "did not return within its deadline" in first and "(stage compile)" in first, first
    assert "compile budget" not in " ".join(rec.verdict.reasons)
    line = summary(rec.stages)
    assert "(failed: timeout" in line and "not a compile error" in line, line


def test_a_runtime_error_that_imitates_a_compiler_is_a_crash_not_compile(flagship):
    rec = evaluate(flagship, RED / "fake_compile_error.py", **ONE)
    assert rec.verdict.category == "crash", (rec.verdict.category, rec.verdict.reasons)
    assert not any("failed to compile" in r for r in rec.verdict.reasons), rec.verdict.reasons


@pytest.mark.parametrize(
    ("name", "category"), [("wrong_shape.py", "interface"), ("wrong_values.py", "wrong")]
)
def test_the_stage_line_names_the_failed_check_and_the_stages_never_run(flagship, name, category):
    rec = evaluate(flagship, RED / name, **ONE)
    assert rec.verdict.category == category, rec.verdict.reasons
    line = summary(rec.stages)
    failed = [s for s in rec.stages if s.status == "failed"]
    assert len(failed) == 1 and failed[0].failed_check.startswith(category), rec.stages
    print(line)
    assert f"(failed: {category}" in line and "never ran: " in line, line
    if failed[0].name == "compile":  # the first call ran the check, the kernel compiled
        assert "not a compile error" in line, line
    assert "e2e (failed)" not in line


def test_a_failure_found_after_the_calls_is_never_charged_to_an_e2e_stage_without_calls(
    flagship,
):
    """Loose tolerances (the sensitivity check, judged once every call ran) showed
    "e2e (failed)" on a task without an `[e2e]` check (issue 47 item 7): the failure is
    charged to the last stage that ran calls, with its check, and e2e is skipped."""
    from kernelloop.evaluate.trusted.values.plan import plan_calls
    from kernelloop.evaluate.trusted.values.stages import StageClock

    plan = plan_calls(flagship, list(flagship.spec.cpu_shapes)[:1], ["float32"])
    assert not [c for c in plan.calls if c.stage == "e2e"]
    clock = StageClock(plan)
    clock.advance("start")
    clock.advance("compile")
    for c in plan.calls:
        clock.judged(c.stage, failed=False)
    clock.close("failed", check="tolerance")
    stages = {s.name: s for s in clock.stages()}
    assert stages["e2e"].status == "skipped"
    assert stages["full"].status == "failed" and stages["full"].failed_check == "tolerance"
    line = summary(clock.stages())
    assert "full" in line and "(failed: tolerance)" in line and "e2e (failed" not in line, line
