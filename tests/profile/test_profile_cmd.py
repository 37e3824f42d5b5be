"""`kernelloop profile`: real subprocesses and the real sandbox; Nsight Compute only on a GPU."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tests.conftest import FLAGSHIP, FUSED

from kernelloop.errors import KernelloopError
from kernelloop.profile import estimate_tokens
from kernelloop.profile.collect import Collected, _job, _run_ncu
from kernelloop.profile.fallback import occupancy
from kernelloop.profile.ncu_driver import find_ncu
from kernelloop.profile.render import prompt_text
from kernelloop.profile.run import default_shape, profile_candidate
from kernelloop.sandbox import SandboxConfig

BASELINE = FLAGSHIP / "baseline.py"
FIXTURES = Path(__file__).parent / "fixtures"


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "profile", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_cpu_fallback_profiles_the_flagship_with_its_parent():
    r = _cli(
        str(FLAGSHIP),
        str(FUSED),
        "--parent",
        str(BASELINE),
        "--shape",
        "16384x8192",
        "--dtype",
        "bfloat16",
        "--device",
        "cpu",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    prof, parent = out["profile"], out["parent_profile"]
    assert prof["source"] == "fallback" and parent["source"] == "fallback"
    assert [f["name"] for f in parent["compile_facts"]] == [
        "_layernorm_kernel",
        "_softmax_kernel",
        "_dropout_residual_kernel",
    ]
    (fact,) = prof["compile_facts"]
    # The row is held in registers: 196 with triton 3.6 (ncu on the H200 agrees); anything
    # above 128 per thread at 8 warps leaves room for one block per SM.
    assert (
        fact["name"] == "_fused_kernel"
        and fact["constexprs"] == {"BLOCK": 8192}
        and fact["num_warps"] == 8
    )
    assert fact["n_regs"] > 128 and fact["spill_store_bytes"] == 0
    assert out["agent_metrics"]["theoretical_occupancy_pct"] == 12.5
    text = out["summary"]
    assert estimate_tokens(text) <= 1500
    for needle in (
        "no hardware counters",
        "Missing: Nsight Compute: no CUDA GPU on this machine",
        "Roofline floor: 805 MB minimal DRAM bytes = 188.6 us",
        "kernel launches per call 3 → 1",
        "`_fused_kernel` 12.5% (limited by registers)",
        "REGRESSIONS",
        "warp stall reasons",
    ):
        assert needle in text, needle
    assert "MEMORY-BOUND" not in text


def test_a_candidate_that_does_not_import_is_a_usage_error(tmp_path, flagship):
    # In-process (the CLI turns a KernelloopError into exit 2); the worker is still a real
    # sandboxed process.
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('candidate is broken on purpose')\n")
    with pytest.raises(KernelloopError, match=r"broken\.py failed to import .*broken on purpose"):
        profile_candidate(flagship, bad, device="cpu", timeout_s=120)


def _fake_ncu(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "ncu"
    exe.write_text(f"#!{sys.executable}\nimport shutil, sys\na = sys.argv[1:]\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@pytest.mark.parametrize("case", ["report", "no-permission"])
def test_ncu_runs_in_the_sandbox_and_its_report_or_failure_comes_back(tmp_path, flagship, case):
    # A stand-in for ncu (no GPU here), run through the real sandbox with the argv we build:
    # it either writes the captured H200 report to --log-file or fails as a locked-down
    # driver does.
    # The report is copied next to the stand-in first: a checkout under /tmp (a CI clone)
    # is hidden inside the sandbox, tmp_path is bound in.
    report = tmp_path / "ncu_fused.csv"
    shutil.copy(FIXTURES / "ncu_fused.csv", report)
    body = (
        f"shutil.copy({str(report)!r}, a[a.index('--log-file') + 1])"
        if case == "report"
        else "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'); sys.exit(1)"
    )
    job = _job(flagship, FUSED, default_shape(flagship), "bfloat16", "cpu")
    got = Collected()
    cfg = SandboxConfig(timeout_s=60, rw_paths=[tmp_path])
    _run_ncu(got, job, cfg, _fake_ncu(tmp_path, body), FUSED.read_bytes())
    if case == "report":
        assert [k.name for k in got.kernels] == ["_fused_kernel"] and got.missing == []
    else:
        assert got.kernels == [] and "NVreg_RestrictProfilingToAdminUsers=0" in got.missing[0]


def test_occupancy_from_compile_facts_matches_the_h200_reports():
    # (registers, warps, shared bytes) -> ncu's theoretical occupancy in the H200 fixtures
    assert (
        occupancy(196, 8, 1056).theoretical_pct == 12.5
        and occupancy(196, 8, 1056).limiter == "registers"
    )
    assert occupancy(34, 4, 1040).theoretical_pct == 75.0
    assert occupancy(32, 4, 0).theoretical_pct == 100.0
    assert occupancy(32, 4, 0, arch="sm_80") is None


def test_launches_are_recorded_without_running_and_data_dependent_code_falls_back_to_cpu(
    tmp_path, flagship
):
    from kernelloop.profile.launches import record_launches

    src = tmp_path / "cand.py"
    src.write_text(
        "import torch, triton, triton.language as tl\n\n"
        "@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "def forward(x, residual, weight, bias, *, p, eps, seed):\n"
        "    if float(x.abs().max()) > 0:  # needs data: impossible on meta tensors\n"
        "        for _ in range(3):\n            _k[(1,)](x, x.numel(), BLOCK=128, num_warps=2)\n"
        "    return x\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("cand_for_test", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rec = record_launches(
        mod.forward,
        flagship.load_function("inputs"),
        mod,
        {"rows": 5, "cols": 1000},
        torch.float32,
        {"p": 0.1, "eps": 1e-5, "seed": 1},
    )
    assert [(launch.kernel, launch.count, launch.kwargs["BLOCK"]) for launch in rec.launches] == [
        ("_k", 3, 128)
    ]
    assert any("meta tensors failed" in n for n in rec.notes)


@pytest.mark.gpu
def test_profile_command_on_the_gpu_uses_nsight_compute_within_a_minute(flagship):
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed here")
    t0 = time.monotonic()
    out = profile_candidate(flagship, FUSED, shape="16384x8192", dtype="bfloat16", device="cuda")
    assert time.monotonic() - t0 <= 60
    report = out.report
    assert report.source == "ncu", report.missing
    assert [k.name for k in report.kernels] == ["_fused_kernel"]
    assert report.classifications[0].bound != "memory-bound", report.classifications[0].evidence
    assert report.roofline is not None and report.roofline.pct_of_floor < 60
    assert estimate_tokens(prompt_text(report)) <= 1500
    assert torch.cuda.is_available()
